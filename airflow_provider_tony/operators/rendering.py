"""A job given as a file or a dict, read and rendered value by value (``JobRendering``).

``job="training/x.yaml"`` is read as ``tony`` reads a job file (``jobfile.py``),
beside the DAG file or in ``template_searchpath``, and parsed before anything is
rendered: each string value is then a Jinja template of its own, so a template changes
values, never keys or structure. Relative paths in the file are read beside it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_tony.runtime.errors import JobFileError, SpecError
from airflow_provider_tony.runtime.spec import shown as shown_value
from airflow_provider_tony.yarn.source import paths_beside_job_file

if TYPE_CHECKING:
    _Operator = BaseOperator
else:  # a plain class at run time: TonyOperator's MRO holds BaseOperator
    _Operator = object


class JobRendering(_Operator):
    """The ``job`` field of an operator: a JobSpec dict, or the path of a JobSpec YAML read and rendered."""

    job: dict[str, Any] | str
    #: The path as given: rendering replaces ``job`` by the file's rendered text.
    _job_file: str | None
    #: What a ``job`` string must end with to be read as a job file.
    job_file_suffixes: Sequence[str] = (".yaml", ".yml")

    def _job_file_path(self) -> Path:
        """Where ``job="x.yaml"`` lives: as given, else beside the DAG file or in ``template_searchpath``."""
        path = Path(str(self._job_file))
        if path.is_absolute():
            return path
        folders = [Path(self.dag.fileloc).parent] if self.dag and self.dag.fileloc else []
        searchpath = getattr(self.dag, "template_searchpath", None) or []
        folders += [Path(p) for p in ([searchpath] if isinstance(searchpath, str) else searchpath)]
        return next((f / path for f in folders if (f / path).is_file()), folders[0] / path if folders else path)

    def _read_job_file(self) -> dict[str, Any]:
        """The job file's mapping, read as ``tony`` reads it (``jobfile.py``), not yet rendered.

        A file that is missing or not a job fails the task at once (no retry can
        fix it) and says where it was looked for, or where in the file the fault is.
        """
        from airflow_provider_tony.jobfile import read_job_file

        path = self._job_file_path()
        try:
            return read_job_file(path, shown_as=self._job_file, templated=True)
        except OSError as exc:
            raise AirflowFailException(
                f"invalid job, nothing was submitted: job: {self._job_file!r} not found (looked beside the DAG file "
                f"and in template_searchpath, from {path.parent}); give the file's path relative to the DAG file, "
                f"or an absolute one ({type(exc).__name__})"
            ) from exc
        except JobFileError as exc:
            raise AirflowFailException(f"invalid job, nothing was submitted: job: {exc}") from exc

    def _job_dict(self) -> dict[str, Any]:
        if isinstance(self.job, str):
            if self._job_file is None or self.job != self._job_file:
                raise SpecError(
                    "job",
                    f"{self.job[:80]!r} is not a JobSpec dict nor a path ending in "
                    f"{' or '.join(self.job_file_suffixes)}; give one of them",
                )
            data = self._read_job_file()  # not rendered (execute called directly): as it is
        elif isinstance(self.job, dict):
            data = copy.deepcopy(self.job)
        else:
            raise SpecError("job", f"{type(self.job).__name__} is not a JobSpec, dict or YAML path")
        if self._job_file is not None:
            return dict(paths_beside_job_file(data, self._job_file_path().parent))
        return data

    def render_template(
        self, content: Any, context: Context, jinja_env: Any = None, seen_oids: set[int] | None = None
    ) -> Any:
        """``job`` (a job file, parsed first, or a dict) renders value by value (``_render_job``).

        Every other field renders as Airflow renders it, and so does a value Airflow
        marked as not to render (``seen_oids``: a mapped value resolved from an XCom is data).
        """
        if seen_oids is not None and id(content) in seen_oids:
            return content
        if isinstance(content, str) and self._job_file is not None and content == self._job_file:
            return self._render_job(self._read_job_file(), context, jinja_env or self.get_template_env(), "")
        if isinstance(content, dict) and content is self.job:
            return self._render_job(content, context, jinja_env or self.get_template_env(), "")
        return super().render_template(content, context, jinja_env, seen_oids)

    def _render_job(self, value: Any, context: Context, jinja_env: Any, where: str) -> Any:
        """Each string of the parsed job rendered on its own, by Airflow's Jinja environment.

        Keys are never rendered, and a rendered value stays one value: text that
        looks like YAML (``x\nqueue: production``) is a string of the field it
        landed in, and the JobSpec's validation judges it there (a number
        spelled as text becomes a number, ``numbers_from_text``). Under
        ``render_template_as_native_obj`` a template that renders to a list or a
        mapping is refused: it would change the job's structure.
        """
        import jinja2

        if isinstance(value, dict):
            return {
                k: self._render_job(v, context, jinja_env, f"{where}.{k}" if where else str(k))
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self._render_job(v, context, jinja_env, f"{where}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, str):
            return value
        try:
            rendered = self._render(jinja_env.from_string(value), context)
        except jinja2.TemplateSyntaxError as exc:
            raise AirflowFailException(
                f"invalid job, nothing was submitted: job: {where}: {shown_value(value)} is not a valid Jinja template "
                f"(line {exc.lineno}: {exc.message}); fix the template"
            ) from exc
        if rendered is not None and not isinstance(rendered, (str, int, float, bool)):
            raise AirflowFailException(
                f"invalid job, nothing was submitted: job: {where}: the template {shown_value(value)} rendered to a "
                f"{type(rendered).__name__}; a template may give a field its value, never add structure to the job"
            )
        return rendered


__all__ = ["JobRendering"]
