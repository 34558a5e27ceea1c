def greeting(name: str) -> str:
    return f"hello from {name}"
