"""The layers' arrows point down: each folder of src/ includes only the
folders below it (the allow-list), and docs/design.md's picture names every
folder. A new folder must be placed here before anything can include it."""
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
DESIGN = SRC.parent / "docs" / "design.md"

# From the top (the C ABI) down; each may include the folders listed.
MAY_INCLUDE = {
    "api": {"init", "coll", "transport", "topo", "net", "core", "bootstrap", "device", "base"},
    "init": {"coll", "transport", "topo", "net", "core", "bootstrap", "device", "base"},
    "coll": {"transport", "topo", "net", "core", "bootstrap", "device", "base"},
    "transport": {"topo", "net", "core", "bootstrap", "device", "base"},
    "topo": {"net", "core", "bootstrap", "base"},
    "net": {"bootstrap", "base"},
    "core": {"device", "base"},
    "bootstrap": {"base"},
    "device": {"base"},
    "base": set(),
}


def includes(layer: str) -> list[tuple[str, str]]:
    """(file, folder) for every `#include "folder/..."` in src/<layer>/."""
    found = []
    for f in sorted((SRC / layer).iterdir()):
        if f.is_file():
            for folder in re.findall(r'^\s*#\s*include\s+"([A-Za-z_]+)/', f.read_text(), re.M):
                found.append((f.name, folder))
    return found


def test_every_folder_of_src_has_a_place():
    folders = {p.name for p in SRC.iterdir() if p.is_dir()}
    assert folders <= set(MAY_INCLUDE), f"place {sorted(folders - set(MAY_INCLUDE))} in MAY_INCLUDE"


def test_no_folder_includes_one_above_it():
    # Folders of include/ (the public headers: plugin/) are below every layer.
    public = {p.name for p in (SRC.parent / "include").iterdir() if p.is_dir()}
    wrong = [f"src/{layer}/{name} includes {folder}/"
             for layer in MAY_INCLUDE if (SRC / layer).is_dir()
             for name, folder in includes(layer)
             if folder != layer and folder not in MAY_INCLUDE[layer] and folder not in public]
    assert not wrong, "\n".join(wrong)


def test_the_design_picture_names_every_folder():
    text = DESIGN.read_text()
    picture = text.split("## Layers", 1)[1].split("```")[1]
    missing = [p.name for p in SRC.iterdir() if p.is_dir() and f"src/{p.name}/" not in picture]
    assert not missing, f"docs/design.md's layer picture lacks {missing}"
