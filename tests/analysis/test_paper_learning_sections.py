"""results.md reads the longer learning study's tables from its results folder's tables/."""

from scpo.tables.paper import _learning_sections


def test_the_study_tables_are_read_from_its_tables_folder(tmp_path):
    study = tmp_path / "results"
    (study / "tables").mkdir(parents=True)
    (study / "tables" / "learning_ranking.md").write_text("## Learning ranking\n\nstudy\n")
    sections = _learning_sections(tmp_path / "reports", study)
    assert sections == ["## Full-size study (experiments/learning_benchmark): Learning ranking\n\nstudy\n"]
