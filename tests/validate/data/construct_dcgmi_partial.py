"""Writes dcgmi-diag-r3-partial.txt (see README.md): `dcgmi diag -r 3` of DCGM 3.3.7 on 8
A100 where GPU 3 fails the GPU Memory test and the other seven pass it. Run from the
project root:

    PYTHONPATH=. venv/bin/python tests/validate/data/construct_dcgmi_partial.py

Every row is rendered as NVIDIA/DCGM v3.3.7 renders it:
- dcgmi/Diag.cpp:54-70: DIAG_HEADER, DIAG_DATA (the row stencil), the section rows, DIAG_FOOTER;
  Diag.cpp:638-653: the order (Metadata, Deployment, Integration, Hardware, Stress);
- dcgmi/Diag.cpp:1056-1208 HelperDisplayGpuResults: "Pass - All" when every GPU passed,
  otherwise "Pass - GPUs: 0, 1, ..." under the test's name, then "Fail - GPU: 3" with the
  name cell left empty (`isDisplayedFirst ? displayName : ""`), then the GPUs' warnings;
- dcgmi/Diag.cpp:991-1008 DisplayVerboseInfo: a message in slices of 45 characters, the name
  ("Warning") on the first slice only;
- dcgmi/CommandOutputController.cpp ReplaceTag: a value padded with blanks to its tag's
  width, "<DATA_NAME ... >" and "<DATA_INFO ... >" included;
- dcgmlib/dcgm_errors.h:339 DCGM_FR_FAULTY_MEMORY_MSG, the memory test's message.
"""

from pathlib import Path

HERE = Path(__file__).parent
HEADER = ("+---------------------------+------------------------------------------------+\n"
          "| Diagnostic                | Result                                         |\n"
          "+===========================+================================================+\n")
STENCIL = "| <DATA_NAME              > | <DATA_INFO                                   > |\n"
FOOTER = "+---------------------------+------------------------------------------------+\n"
METADATA = "|-----  Metadata  ----------+------------------------------------------------|\n"
DEPLOYMENT = "|-----  Deployment  --------+------------------------------------------------|\n"
INTEGRATION = "+-----  Integration  -------+------------------------------------------------+\n"
HARDWARE = "+-----  Hardware  ----------+------------------------------------------------+\n"
STRESS = "+-----  Stress  ------------+------------------------------------------------+\n"
NAME_WIDTH = len("<DATA_NAME              >")
INFO_WIDTH = len("<DATA_INFO                                   >")
INFO_SLICE = 45  # Diag.cpp DATA_INFO_TAG_LEN


def _fit(value: str, width: int) -> str:
    # ReplaceTag: padded, or cut with "..." at the end.
    return value.ljust(width) if len(value) <= width else value[:width - 3] + "..."


def row(name: str, info: str) -> str:
    start = STENCIL.index("<DATA_NAME")
    middle = STENCIL.index("<DATA_INFO")
    return (STENCIL[:start] + _fit(name, NAME_WIDTH) + STENCIL[start + NAME_WIDTH:middle]
            + _fit(info, INFO_WIDTH) + STENCIL[middle + INFO_WIDTH:])


def verbose(name: str, info: str) -> list[str]:
    return [row(name if pos == 0 else "", info[pos:pos + INFO_SLICE])
            for pos in range(0, len(info), INFO_SLICE)]


def gpu_list(word: str, gpus: list[int]) -> str:
    # "Pass - GPUs: 0, 1, 2   " (three blanks after the last, Diag.cpp:1160-1166).
    return f"{word} - GPU{'' if len(gpus) == 1 else 's'}: " + ", ".join(map(str, gpus)) + "   "


def partial_memory_failure() -> str:
    lines = ["Successfully ran diagnostic for group.\n", HEADER, METADATA,
             row("DCGM Version", "3.3.7"),
             row("Driver Version Detected", "580.95.05"),
             row("GPU Device IDs Detected", ",".join(["20b2"] * 8)),
             DEPLOYMENT]
    for test in ("Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks",
                 "Persistence Mode", "Environment Variables", "Page Retirement/Row Remap",
                 "Graphics Processes", "Inforom"):
        lines.append(row(test, "Pass"))
    lines += [INTEGRATION, row("PCIe", "Pass - All"), HARDWARE]
    lines.append(row("GPU Memory", gpu_list("Pass", [0, 1, 2, 4, 5, 6, 7])))
    lines.append(row("", gpu_list("Fail", [3])))
    lines += verbose("Warning", "Found 12 faulty memory elements on GPU 3")
    # The hardware diagnostic runs from -r 3 on; its name is also the header's first cell.
    lines.append(row("Diagnostic", "Pass - All"))
    lines.append(row("Pulse Test", "Skip - All"))
    lines.append(STRESS)
    for test in ("SM Stress", "Targeted Stress", "Targeted Power", "Memory Bandwidth"):
        lines.append(row(test, "Pass - All"))
    # -r 4 only, and the EUD when it is installed.
    for test in ("Memtest", "EUD Test"):
        lines.append(row(test, "Skip - All"))
    lines.append(FOOTER)
    return "".join(lines)


if __name__ == "__main__":
    (HERE / "dcgmi-diag-r3-partial.txt").write_text(partial_memory_failure())
