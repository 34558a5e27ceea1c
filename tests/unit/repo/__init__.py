"""Unit tests of the repository's own tooling (docs, make, bench, devcluster, packaging), not of the package."""
