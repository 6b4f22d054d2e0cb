"""contract/ is the one place the program and the day-2 tools share: no tool imports another
tool, the program imports no tool, nothing imports the `gpu-cluster` command (cli/), which
reaches a tool only through its entry function, and what contract/names.py and
contract/ports.py define is written nowhere else by value."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from contract import names, ports
from tests.builders import PROJECT_DIR

ROOT = Path(PROJECT_DIR)
# The commands that run apart from the program (`python -m NAME`, the policy pack).
TOOLS = ("doctor", "validate", "distribute", "policy", "pins")
# `gpu-cluster`: its subcommands are the tools' (and the preview's) entry functions, the only
# modules of theirs it may import, each inside the function that runs it.
COMMAND = "cli"
ENTRIES = ("preview.__main__", "policy.offline", "doctor.__main__", "validate.__main__",
           "distribute.__main__")
# The program and what renders its build folder: `pulumi up` and the offline preview.
PROGRAM = ("components", "config", "preview", "acceptance", "__main__")
# Where a tool reaches into the program, and why; every other import of it is refused.
# Those in functions run only on their command (the tool runs without the program's
# dependencies otherwise).
PROGRAM_IMPORTS = {
    # `distribute demo` makes outputs by running the program under the offline preview.
    ("distribute/demo.py", "preview"): "function",
    # `python -m policy.offline`: the rules over every example stack's offline preview.
    ("policy/offline.py", "preview"): "function",
    ("policy/offline.py", "config"): "function",
    # `python -m pins` checks the pins of config/versions.py.
    ("pins/__main__.py", "config"): "function",
    # nccl-tests' output, judged as the acceptance MPIJob's launcher judges it (standard
    # library only, acceptance/__init__.py imports nothing at load).
    ("validate/parse.py", "acceptance"): "module",
}
# What runs on hosts (components/scripts/), upstream's files and the tests are not the
# program's modules.
SKIPPED = ("venv", "vendor", "build", "tests", "contract", "components/scripts")


def python_files(under: str = "") -> list[Path]:
    found = []
    for path in sorted((ROOT / under).rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith(".") or any(relative == s or relative.startswith(s + "/")
                                           for s in SKIPPED):
            continue
        found.append(path)
    return found


def top_package(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else path.stem


def imports(tree: ast.AST, full: bool = False) -> list[tuple[str, str]]:
    """(top-level package, or with `full` the module named, and "module" or "function") of
    every absolute import."""
    found = []

    def name(module: str) -> str:
        return module if full else module.split(".")[0]

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = "function" if isinstance(child, (ast.FunctionDef,
                                                     ast.AsyncFunctionDef)) else where
            if isinstance(child, ast.Import):
                found.extend((name(alias.name), where) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.append((name(child.module), where))
            visit(child, inner)
    visit(tree, "module")
    return found


def command_import_problems(relative: str, source: str) -> list[str]:
    """What breaks the command's rule in one file: cli/ importing more of a tool than its
    entry function's module, or at load; anything else importing cli/."""
    problems = []
    for module, where in imports(ast.parse(source, relative), full=True):
        package = module.split(".")[0]
        if relative.startswith(COMMAND + "/"):
            if package in TOOLS + PROGRAM:
                if module not in ENTRIES:
                    problems.append(f"{relative} imports {module}: only a tool's entry "
                                    f"function ({', '.join(ENTRIES)})")
                elif where != "function":
                    problems.append(f"{relative} imports {module} at load: only in the "
                                    "function of its subcommand")
        elif package == COMMAND:
            problems.append(f"{relative} imports the command '{COMMAND}': it runs the tools, "
                            "not the other way round")
    return problems


def tool_files() -> list[Path]:
    return [path for tool in TOOLS for path in python_files(tool)]


@pytest.mark.parametrize("path", tool_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_tool_imports_no_other_tool_and_the_program_only_where_listed(path):
    relative = path.relative_to(ROOT).as_posix()
    own = top_package(path)
    for package, where in imports(ast.parse(path.read_text(), relative)):
        assert package == own or package not in TOOLS, (
            f"{relative} imports the tool '{package}': what tools share lives in contract/")
        if package in PROGRAM:
            allowed = PROGRAM_IMPORTS.get((relative, package))
            assert allowed is not None, (
                f"{relative} imports the program's '{package}': tools read what the program "
                "hands them through contract/")
            assert where == allowed or allowed == "module", (
                f"{relative} imports '{package}' at load: only inside the function that "
                "needs it, so the tool runs without the program's dependencies")


@pytest.mark.parametrize("path", python_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_only_the_command_reaches_the_tools_entry_functions(path):
    relative = path.relative_to(ROOT).as_posix()
    assert command_import_problems(relative, path.read_text()) == []


def test_the_command_rule_finds_each_way_to_break_it():
    tool_into_cli = command_import_problems("doctor/report.py", "from cli import discover\n")
    beyond_entry = command_import_problems(
        "cli/__main__.py", "def f():\n    from doctor.checks import every\n")
    at_load = command_import_problems("cli/__main__.py", "from doctor.__main__ import main\n")
    allowed = command_import_problems(
        "cli/__main__.py", "import argparse\nfrom contract import command\n"
        "def f():\n    from policy.offline import main\n")
    assert [len(tool_into_cli), len(beyond_entry), len(at_load), allowed] == [1, 1, 1, []]
    assert "imports the command 'cli'" in tool_into_cli[0]
    assert "doctor.checks: only a tool's entry function" in beyond_entry[0]
    assert "doctor.__main__ at load" in at_load[0]


def test_the_program_and_the_contract_import_no_tool():
    program = [path for package in PROGRAM if package != "__main__"
               for path in python_files(package)] + [ROOT / "__main__.py"]
    contract = sorted((ROOT / "contract").rglob("*.py"))
    found = [f"{path.relative_to(ROOT)} imports {package}"
             for path in program + contract
             for package, _ in imports(ast.parse(path.read_text()))
             if package in TOOLS]
    assert found == []
    # The contract stands alone: it imports nothing of the project but itself.
    project = set(TOOLS) | set(PROGRAM) | {COMMAND, "tests", "benchmarks"}
    assert [f"{path.relative_to(ROOT)} imports {package}" for path in contract
            for package, _ in imports(ast.parse(path.read_text()))
            if package in project] == []


def test_the_policy_packs_modules_need_only_the_standard_library():
    """The CLI installs only policy/requirements.txt into the pack's virtualenv; the rules
    and the contract modules they import load without any site-packages (-S)."""
    probe = ("import sys; sys.path.insert(0, '.'); "
             "import policy.rules, policy.stack_rules, contract.names, contract.ports; "
             "ours = {'__main__', 'policy', 'contract'} | set(sys.stdlib_module_names); "
             "print(sorted({m.split('.')[0] for m in sys.modules} - ours))")
    done = subprocess.run([sys.executable, "-S", "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- values written once ---------------------------------------------------------------------

def contract_values() -> dict[str, object]:
    return {f"{module.__name__}.{name}": value for module in (names, ports)
            for name, value in vars(module).items() if name.isupper()}


def _distinctive(value: str) -> bool:
    # A plain lowercase word ("nodes", "kubeconfig") is also a list's or a file's name:
    # only an assignment of it is a copy. Anything else is the contract's own.
    return re.fullmatch(r"[a-z]+", value) is None


def _template(node: ast.JoinedStr) -> str:
    """An f-string with its fields as `{name}`, to compare with a str.format template."""
    return "".join(part.value if isinstance(part, ast.Constant)
                   else "{" + ast.unparse(part.value) + "}" for part in node.values)


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _assigned_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Assign):
        return [ast.unparse(target) for target in node.targets]
    if isinstance(node, ast.AnnAssign):
        return [ast.unparse(node.target)]
    return []


def copies(tree: ast.AST, values: dict[str, object]) -> list[tuple[int, str]]:
    """(line, contract name) of each value of the contract written out again."""
    strings = {value: name for name, value in values.items() if isinstance(value, str)}
    collections = {name: value for name, value in values.items()
                   if isinstance(value, (tuple, dict))}
    port_numbers = {value: name for name, value in values.items()
                    if name.startswith("contract.ports.") and isinstance(value, int)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in strings and _distinctive(node.value):
                found.append((node.lineno, strings[node.value]))
        elif isinstance(node, ast.JoinedStr) and _template(node) in strings:
            found.append((node.lineno, strings[_template(node)]))
        elif isinstance(node, (ast.Tuple, ast.List, ast.Dict)):
            value = _literal(node)
            for name, wanted in collections.items():
                if value is not None and value == wanted or (
                        isinstance(value, list) and tuple(value) == wanted):
                    found.append((node.lineno, name))
        targets = _assigned_names(node)
        value_node = getattr(node, "value", None)
        if isinstance(node, ast.keyword) and node.arg:
            targets = [node.arg]
        if not targets or value_node is None:
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
                value_node, ast.Constant) and value_node.value in strings \
                and not _distinctive(value_node.value):
            found.append((node.lineno, strings[value_node.value]))
        # A port by number where a name says it is a port (`api_port: int = 6443`,
        # `CONTROL_PLANE_PORTS = {"k0s-join-api": (9443, "tcp")}`, `fixed_api_port=6443`).
        if any("port" in target.lower() for target in targets):
            for inner in ast.walk(value_node):
                if isinstance(inner, ast.Constant) and type(inner.value) is int \
                        and inner.value in port_numbers:
                    found.append((inner.lineno, port_numbers[inner.value]))
    return sorted(set(found))


@pytest.mark.parametrize("path", python_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_contract_value_is_written_once(path):
    relative = path.relative_to(ROOT).as_posix()
    found = copies(ast.parse(path.read_text(), relative), contract_values())
    assert found == [], "; ".join(
        f"{relative}:{line} repeats {name} by value: import it from contract/"
        for line, name in found)


def test_the_copy_finder_finds_each_kind_of_copy():
    """Each way a value was copied before the contract existed is found."""
    source = '\n'.join([
        'POOL_LABEL = "gpu-cluster/pool"',
        'WORKER_ROLES = ("worker", "controller+worker")',
        'ADMIN_OUTPUT = "kubeconfig"',
        'ADMIN_PORTS = {22: "SSH", 2049: "NFS", 6443: "the Kubernetes API", '
        '9443: "the k0s join API", 9345: "the RKE2 supervisor (agent joins)", '
        '10250: "the kubelet API", 2379: "etcd\'s client API", 2380: "etcd\'s peer port", '
        '2381: "etcd\'s metrics", 8132: "k0s\'s konnectivity server", '
        '6444: "the Kubernetes API behind k0s\'s virtual IP"}',
        'CONTROL_PLANE_PORTS = {"k0s-join-api": (9443, "tcp")}',
        'lines = [f"  {action}) gpu_cluster_{action} </dev/null ;;" for action in actions]',
        'settings = Distribution(pin, form, fixed_api_port=6443)',
        # Not copies: a plain word used as a word, a port number under another name.
        'items = body["nodes"]',
        'aws.vpc.SecurityGroupIngressRule("x", description="nodes")',
        'salt = text[:22]',
    ])
    found = {name.split(".")[-1] for _, name in copies(ast.parse(source), contract_values())}
    assert found == {"POOL_LABEL", "WORKER_ROLES", "ADMIN_KUBECONFIG_OUTPUT", "ADMIN_PORTS",
                     "ENVELOPE_BRANCH", "SSH", "NFS", "KUBERNETES_API", "K0S_JOIN_API",
                     "RKE2_SUPERVISOR", "KUBELET", "ETCD_CLIENT", "ETCD_PEER", "ETCD_METRICS",
                     "KONNECTIVITY", "K0S_CPLB_PROXY"}


def test_the_program_exports_the_outputs_the_tools_read():
    """Every output name of the contract is one the program exports: __main__.py exports
    Cluster.outputs, whose names are components/cluster.py OUTPUTS."""
    from components.cluster import OUTPUTS

    outputs = {value for name, value in vars(names).items() if name.endswith("_OUTPUT")}
    assert outputs <= set(OUTPUTS), sorted(outputs - set(OUTPUTS))
    assert "for name, value in cluster.outputs.items():" in (ROOT / "__main__.py").read_text()