"""JSON lines as the scripts read them: one JSON object per non-blank line."""
import json


def read_objects(path):
    """[(line number, object)] of the file at `path`. A line that is not a JSON object raises
    ValueError naming path:line; a file that cannot be read raises OSError."""
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from e
            if not isinstance(r, dict):
                raise ValueError(f"{path}:{n}: not a JSON object")
            rows.append((n, r))
    return rows
