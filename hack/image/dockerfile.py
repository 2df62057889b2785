"""A Dockerfile parser for the subset this project's Dockerfile uses: text + build args in, a list
of typed instructions out, with Docker's variable substitution and quoting already applied. Pure:
no I/O, nothing run.

    instructions = parse(Path("Dockerfile").read_text(), {"BASE": "debian:bookworm"})
    image_config(instructions)   # the OCI config's Entrypoint, Cmd, User, Env, ... as docker build sets them

Supported: ARG, FROM (one stage), ENV, WORKDIR, COPY, RUN, USER, ENTRYPOINT, CMD, EXPOSE, LABEL,
line continuations, comments, JSON (exec) and shell forms, $VAR, ${VAR}, ${VAR:-word} and the
other POSIX-style modifiers Docker accepts (-, +, ?, with or without the colon). Anything else is
a DockerfileError naming the line, never a silently different image.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass

SUPPORTED = ("ARG", "FROM", "ENV", "WORKDIR", "COPY", "RUN", "USER", "ENTRYPOINT", "CMD", "EXPOSE", "LABEL")
# What docker build puts in the config when the base image has no PATH (a root filesystem has none).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DEFAULT_ENV = (("PATH", DEFAULT_PATH),)

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PORT = re.compile(r"\d{1,5}(-\d{1,5})?(/(tcp|udp|sctp))?", re.IGNORECASE)


class DockerfileError(ValueError):
    def __init__(self, message: str, line: int | None = None) -> None:
        self.line = line
        super().__init__(f"Dockerfile line {line}: {message}" if line else f"Dockerfile: {message}")


@dataclass(frozen=True)
class Arg:
    line: int
    name: str
    value: str | None  # after --build-arg overrides; None: declared without a value


@dataclass(frozen=True)
class From:
    line: int
    image: str
    platform: str | None = None


@dataclass(frozen=True)
class Env:
    line: int
    pairs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Workdir:
    line: int
    path: str  # absolute, resolved against the previous WORKDIR


@dataclass(frozen=True)
class Copy:
    line: int
    sources: tuple[str, ...]  # relative to the build context
    dest: str  # as written (after substitution); relative ones are under the WORKDIR
    workdir: str
    chown: str | None = None
    chmod: str | None = None


@dataclass(frozen=True)
class Run:
    line: int
    argv: tuple[str, ...]  # shell form: ("/bin/sh", "-c", text)
    shell_form: bool
    args: tuple[tuple[str, str], ...] = ()  # the ARGs in scope with a value (docker sets them in RUN's env)


@dataclass(frozen=True)
class User:
    line: int
    user: str


@dataclass(frozen=True)
class Entrypoint:
    line: int
    argv: tuple[str, ...]
    shell_form: bool


@dataclass(frozen=True)
class Cmd:
    line: int
    argv: tuple[str, ...]
    shell_form: bool


@dataclass(frozen=True)
class Expose:
    line: int
    ports: tuple[str, ...]  # "8443/tcp"


@dataclass(frozen=True)
class Label:
    line: int
    pairs: tuple[tuple[str, str], ...]


Instruction = Arg | From | Env | Workdir | Copy | Run | User | Entrypoint | Cmd | Expose | Label


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number of its first physical line, text) for each instruction: comments and blank lines
    dropped, continuations (a trailing backslash) joined, comment lines inside a continuation
    skipped as docker does."""
    out: list[tuple[int, str]] = []
    buf: list[str] | None = None
    start = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip("\r")
        stripped = line.strip()
        if buf is None:
            if not stripped or stripped.startswith("#"):
                if number == 1 or not out:
                    _check_directive(stripped, number)
                continue
            start, buf = number, []
        elif not stripped or stripped.startswith("#"):
            continue
        body = line.rstrip()
        if body.endswith("\\"):
            buf.append(body[:-1])
            continue
        buf.append(line)
        out.append((start, "".join(buf)))
        buf = None
    if buf is not None:
        out.append((start, "".join(buf)))
    return [(number, joined) for number, joined in out if joined.strip()]  # a lone "\" joins nothing


def _check_directive(stripped: str, number: int) -> None:
    match = re.fullmatch(r"#\s*escape\s*=\s*(\S*)\s*", stripped, re.IGNORECASE)
    if match and match.group(1) != "\\":
        raise DockerfileError(f"parser directive escape={match.group(1)} is not supported (only \\)", number)


def parse(
    text: str,
    build_args: dict[str, str] | None = None,
    base_env: tuple[tuple[str, str], ...] = DEFAULT_ENV,
) -> list[Instruction]:
    """The instructions of a single-stage Dockerfile, substituted as docker build would with
    build_args (--build-arg) and the base image's environment base_env."""
    build_args = dict(build_args or {})
    global_args: dict[str, str | None] = {}
    stage_args: dict[str, str | None] = {}
    env: dict[str, str] = {}
    workdir = "/"
    seen_from = False
    out: list[Instruction] = []
    for line, logical in logical_lines(text):
        match = re.match(r"\s*(\S+)(.*)\Z", logical, re.S)
        assert match is not None  # a logical line is never blank
        keyword, rest = match.group(1).upper(), match.group(2).strip()
        if keyword not in SUPPORTED:
            raise DockerfileError(
                f"unsupported instruction {match.group(1)!r} (supported: {', '.join(SUPPORTED)})", line
            )
        if not seen_from and keyword not in ("ARG", "FROM"):
            raise DockerfileError(f"{keyword} before FROM", line)
        if not rest:
            raise DockerfileError(f"{keyword} needs arguments", line)
        scope: dict[str, str] = {k: v for k, v in stage_args.items() if v is not None} | env
        if keyword == "ARG":
            declared = global_args if not seen_from else stage_args
            lookup = {k: v for k, v in declared.items() if v is not None} | (env if seen_from else {})
            for raw in _split_raw(rest, line):
                name, eq, default = raw.partition("=")
                if not _NAME.fullmatch(name):
                    raise DockerfileError(f"ARG: invalid name {name!r}", line)
                value: str | None = _process(default, lookup, line) if eq else None
                if name in build_args:
                    value = build_args[name]
                elif value is None and seen_from:
                    value = global_args.get(name)  # ARG NAME in a stage takes the global default
                declared[name] = value
                if value is not None:
                    lookup[name] = value
                out.append(Arg(line, name, value))
        elif keyword == "FROM":
            if seen_from:
                raise DockerfileError("a second FROM: multi-stage builds are not supported", line)
            words = [_process(w, {k: v for k, v in global_args.items() if v is not None}, line)
                     for w in _split_raw(rest, line)]  # fmt: skip
            platform = None
            while words and words[0].startswith("--"):
                flag, _, value = words.pop(0).partition("=")
                if flag != "--platform":
                    raise DockerfileError(f"FROM: unsupported flag {flag}", line)
                platform = value
            if len(words) == 3 and words[1].upper() == "AS":
                words = words[:1]
            if len(words) != 1 or not words[0]:
                raise DockerfileError("FROM takes one image (optionally AS name)", line)
            seen_from = True
            env = dict(base_env)
            out.append(From(line, words[0], platform))
        elif keyword in ("ENV", "LABEL"):
            pairs = _pairs(keyword, rest, scope, line)
            if keyword == "ENV":
                env.update(pairs)
                out.append(Env(line, tuple(pairs)))
            else:
                out.append(Label(line, tuple(pairs)))
        elif keyword == "WORKDIR":
            path = _process(rest, scope, line)
            if not path:
                raise DockerfileError("WORKDIR is empty", line)
            workdir = posixpath.normpath(posixpath.join(workdir, path))
            workdir = "/" + workdir.lstrip("/")
            out.append(Workdir(line, workdir))
        elif keyword == "COPY":
            out.append(_copy(rest, scope, workdir, line))
        elif keyword == "RUN":
            if rest.startswith("--") or rest.startswith("<<"):
                raise DockerfileError("RUN flags (--mount, --network, ...) and heredocs are not supported", line)
            argv, shell = _command(rest, line)
            args = tuple((k, v) for k, v in stage_args.items() if v is not None and k not in env)
            out.append(Run(line, argv, shell, args))
        elif keyword == "USER":
            user = _process(rest, scope, line)
            if not user or any(c.isspace() for c in user):
                raise DockerfileError(f"USER: invalid user {user!r}", line)
            out.append(User(line, user))
        elif keyword in ("ENTRYPOINT", "CMD"):
            argv, shell = _command(rest, line)
            out.append(Entrypoint(line, argv, shell) if keyword == "ENTRYPOINT" else Cmd(line, argv, shell))
        elif keyword == "EXPOSE":
            ports = []
            for word in _words(rest, scope, line):
                if not _PORT.fullmatch(word):
                    raise DockerfileError(f"EXPOSE: invalid port {word!r}", line)
                ports.append(word.lower() if "/" in word else word + "/tcp")
            out.append(Expose(line, tuple(ports)))
    if not seen_from:
        raise DockerfileError("no FROM instruction")
    return out


def image_config(instructions: list[Instruction], base_env: tuple[tuple[str, str], ...] = DEFAULT_ENV) -> dict:
    """The OCI image config's `config` object the instructions produce on a base without one."""
    env = dict(base_env)
    config: dict = {}
    cmd_set = False
    for ins in instructions:
        if isinstance(ins, Env):
            env.update(ins.pairs)
        elif isinstance(ins, User):
            config["User"] = ins.user
        elif isinstance(ins, Workdir):
            config["WorkingDir"] = ins.path
        elif isinstance(ins, Entrypoint):
            config["Entrypoint"] = list(ins.argv)
            if not cmd_set:  # an ENTRYPOINT resets a CMD the stage did not set itself
                config.pop("Cmd", None)
        elif isinstance(ins, Cmd):
            config["Cmd"] = list(ins.argv)
            cmd_set = True
        elif isinstance(ins, Expose):
            config.setdefault("ExposedPorts", {}).update({p: {} for p in ins.ports})
        elif isinstance(ins, Label):
            config.setdefault("Labels", {}).update(dict(ins.pairs))
    config["Env"] = [f"{k}={v}" for k, v in env.items()]
    return config


def _command(rest: str, line: int) -> tuple[tuple[str, ...], bool]:
    """Exec form (a JSON array of strings) or shell form; like docker, text that is not a valid JSON
    array of strings is shell form."""
    value = _json_strings(rest)
    if value is not None:
        if not value:
            raise DockerfileError("empty exec form []", line)
        return tuple(value), False
    return ("/bin/sh", "-c", rest), True


def _json_strings(text: str) -> list[str] | None:
    """text as a JSON array of strings (the exec / JSON form), or None when it is not one."""
    if not text.startswith("["):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def _copy(rest: str, scope: dict[str, str], workdir: str, line: int) -> Copy:
    raw = _split_raw(rest, line)
    chown = chmod = None
    while raw and raw[0].startswith("--"):
        flag, _, value = _process(raw.pop(0), scope, line).partition("=")
        if flag == "--chown":
            chown = value
        elif flag == "--chmod":
            if not re.fullmatch(r"[0-7]{3,4}", value):
                raise DockerfileError(f"COPY --chmod: only octal modes are supported, not {value!r}", line)
            chmod = value
        elif flag == "--link":
            continue
        elif flag == "--from":
            raise DockerfileError("COPY --from: multi-stage builds are not supported", line)
        else:
            raise DockerfileError(f"COPY: unsupported flag {flag}", line)
    items: list[str] | None = None
    value = _json_strings(" ".join(raw))
    if value is not None:
        items = [_process(v, scope, line, quotes=False) for v in value]
    if items is None:
        items = [_process(w, scope, line) for w in raw]
    if len(items) < 2 or not all(items):
        raise DockerfileError("COPY needs at least one source and a destination", line)
    for source in items[:-1]:
        if source.startswith("<<"):
            raise DockerfileError("COPY heredocs are not supported", line)
    return Copy(line, tuple(items[:-1]), items[-1], workdir, chown, chmod)


def _pairs(keyword: str, rest: str, scope: dict[str, str], line: int) -> list[tuple[str, str]]:
    """ENV/LABEL: key=value pairs (several, quoted or escaped), or the legacy single `key value`."""
    raw = _split_raw(rest, line)
    if "=" not in raw[0]:
        key = _process(raw[0], scope, line)
        value = rest[len(raw[0]) :].strip()
        if not value:
            raise DockerfileError(f"{keyword} {key} has no value", line)
        pairs = [(key, _process(value, scope, line))]
    else:
        pairs = []
        for word in raw:
            key, eq, value = word.partition("=")
            if not eq:
                raise DockerfileError(f"{keyword}: {word!r} is not key=value", line)
            pairs.append((_process(key, scope, line), _process(value, scope, line)))
    for key, _ in pairs:
        if not key or (keyword == "ENV" and "=" in key):
            raise DockerfileError(f"{keyword}: invalid key {key!r}", line)
    return pairs


def _split_raw(text: str, line: int) -> list[str]:
    """Words separated by unquoted whitespace, quotes and escapes left in (for _process)."""
    words: list[str] = []
    cur: list[str] = []
    i, n = 0, len(text)
    quote = None
    while i < n:
        c = text[i]
        if quote:
            cur.append(c)
            if c == "\\" and quote == '"' and i + 1 < n:
                cur.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif c in " \t\r\n":
            if cur:
                words.append("".join(cur))
                cur = []
        else:
            cur.append(c)
            if c in "'\"":
                quote = c
            elif c == "\\" and i + 1 < n:
                cur.append(text[i + 1])
                i += 1
        i += 1
    if quote:
        raise DockerfileError(f"unterminated {quote} quote", line)
    if cur:
        words.append("".join(cur))
    return words


def _words(text: str, scope: dict[str, str], line: int) -> list[str]:
    return [_process(w, scope, line) for w in _split_raw(text, line)]


def _process(word: str, scope: dict[str, str], line: int, quotes: bool = True) -> str:
    """One word with quotes removed, escapes applied and $VAR / ${VAR...} substituted, as docker's
    shell lexer does: nothing inside '...' is touched; inside "..." a backslash escapes only
    ", $ and itself. quotes=False (the strings of a JSON array): only substitution."""
    out: list[str] = []
    i, n = 0, len(word)
    while i < n:
        c = word[i]
        if c == "'" and quotes:
            end = word.find("'", i + 1)
            if end < 0:
                raise DockerfileError("unterminated ' quote", line)
            out.append(word[i + 1 : end])
            i = end + 1
        elif c == '"' and quotes:
            i += 1
            while True:
                if i >= n:
                    raise DockerfileError('unterminated " quote', line)
                c = word[i]
                if c == '"':
                    i += 1
                    break
                if c == "\\" and i + 1 < n and word[i + 1] in '"$\\':
                    out.append(word[i + 1])
                    i += 2
                else:
                    i = _plain(word, i, scope, line, out)
        elif c == "\\":
            if i + 1 < n:
                out.append(word[i + 1])
            i += 2
        else:
            i = _plain(word, i, scope, line, out)
    return "".join(out)


def _plain(word: str, i: int, scope: dict[str, str], line: int, out: list[str]) -> int:
    """One substitution or one literal character at word[i], the same inside double quotes and
    outside them: appended to out; the index after it."""
    if word[i] == "$":
        value, i = _dollar(word, i, scope, line)
        out.append(value)
        return i
    out.append(word[i])
    return i + 1


def _dollar(word: str, i: int, scope: dict[str, str], line: int) -> tuple[str, int]:
    """The substitution starting at word[i] == '$': (its value, the index after it)."""
    n = len(word)
    if i + 1 < n and word[i + 1] == "{":
        depth, j = 1, i + 2
        while j < n and depth:
            if word[j] == "\\":
                j += 2
                continue
            if word[j] == "{":
                depth += 1
            elif word[j] == "}":
                depth -= 1
            j += 1
        if depth:
            raise DockerfileError(f"missing '}}' in {word[i:]!r}", line)
        inner = word[i + 2 : j - 1]
        name = _NAME.match(inner)
        if not name:
            raise DockerfileError(f"invalid substitution ${{{inner}}}", line)
        key, tail = name.group(0), inner[name.end() :]
        value = scope.get(key)
        if not tail:
            return value or "", j
        op = tail[:2] if tail[:1] == ":" else tail[:1]
        arg = tail[len(op) :]
        if op not in (":-", ":+", ":?", "-", "+", "?"):
            raise DockerfileError(f"unsupported substitution ${{{inner}}}", line)
        is_set = value is not None and (op[0] != ":" or value != "")
        if op.endswith("-"):
            return (value if is_set else _process(arg, scope, line)) or "", j
        if op.endswith("+"):
            return (_process(arg, scope, line) if is_set else ""), j
        if not is_set:
            raise DockerfileError(f"{key}: {_process(arg, scope, line) or 'is not set'}", line)
        return value or "", j
    name = _NAME.match(word, i + 1)
    if not name:
        return "$", i + 1
    return scope.get(name.group(0), ""), name.end()
