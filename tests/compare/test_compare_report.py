"""The report: the headline first, system cards, refusals in one line each,
the failed system kept; plots legible at 1, 2, 6 and 12 systems (legends
outside the axes, bar labels apart); the page self-contained and loaded in
a real headless chromium without errors."""

from __future__ import annotations

import re

import matplotlib.image
import pytest

from caraml.compare import comparison, report
from caraml.compare.charts import style
from tests.compare import browser
from tests.compare import rowfixtures as fx


@pytest.fixture
def mixed_report(tmp_path):
    out = tmp_path / "out"
    argv = [*fx.demo(tmp_path), "--out", str(out), "--reference-system", "A100"]
    assert fx.compare(argv) == comparison.SYSTEM_FAILED
    return out


def _sections(page: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', page)


def test_the_page_opens_with_the_decision_then_the_headline_then_the_system_cards(mixed_report):
    page = (mixed_report / "report.html").read_text()
    sections = _sections(page)
    # the CPU's image rows (resnet18 at 64 px) are not the job's configuration: no image decision
    assert sections[:5] == ["decision-llm", "decision-operator", "headline-llm", "headline-image",
                            "headline-operator"]
    assert sections.index("systems") < sections.index("solution") < sections.index("table-llm") \
        < sections.index("method")
    headline = page.split('id="headline-table-llm"')[1].split("</table>")[0]
    assert [r.split("<")[0] for r in headline.split("<tr><td>")[1:]] == ["GH200", "A100", "MI250", "CPU",
                                                                             "H100"]
    assert "failed: CUDA out of memory" in headline
    # the FNO rows: one line per system and problem, in samples
    operator = page.split('id="headline-table-operator"')[1].split("</table>")[0]
    assert [r.split("<")[0] for r in operator.split("<tr><td>")[1:]] == ["GH200", "A100", "A100"]
    assert "FNO rbc3d fp32 eager" in operator and "FNO rbc2d fp32 eager" in operator
    assert "operator FNO rbc3d fp32 eager: energy not divided" not in page
    # one line per refusal, right under the headline
    assert ('<p class="refused">llm 800M bf16 seq 2048: energy not divided: GH200 counts scope module, '
            'A100 scope gpu; shown side by side</p>') in page
    cards = page.split('id="systems"')[1].split("</section>")[0]
    for text in ("8 GCD", "181 (datasheet)", "0.500 (measured-matmul)", "JURECA GH200: 4x GH200 superchips",
                 "6.2", "0 measured of 1"):
        assert text in cards, text


def test_the_page_is_self_contained(mixed_report):
    page = (mixed_report / "report.html").read_text()
    images = page.count('src="data:image/png;base64,')
    assert images == len(list(mixed_report.glob("*.png"))) >= 4
    assert not re.search(r'(?:src|href)\s*=\s*"(?!data:)', page)
    assert "http://" not in page and "https://" not in page and "<link" not in page


def test_a_power_timeline_per_run_marks_the_warm_up_and_the_timed_window(mixed_report):
    timelines = sorted(p.name for p in mixed_report.glob("power_*.png"))
    assert timelines == ["power_000_GH200.png", "power_001_A100.png"]
    from caraml.compare.power import timeline
    gh200 = timeline(str(next((mixed_report.parent / "gh200").glob("*/*/work"))))
    assert gh200.windows.values.tolist() == [["timed", pytest.approx(39 / 4), pytest.approx(3 * 39 / 4)]]
    assert sorted(gh200.samples["channel"].unique()) == [f"pynvml:{d}_rank0" for d in range(4)]


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 - 1 and b.x0 < a.x1 - 1 and a.y0 < b.y1 - 1 and b.y0 < a.y1 - 1


@pytest.mark.parametrize("count", [1, 2, 6, 12])
def test_plots_keep_legends_outside_the_axes_and_labels_apart(tmp_path, monkeypatch, count):
    checked = []
    save = style.save

    def checking_save(fig, path):
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        axes = [ax.get_window_extent(renderer) for ax in fig.axes if ax.get_label() != "<colorbar>"]
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert not any(_overlaps(box, ax) for ax in axes), f"{path.name}: legend over the axes"
        for ax in fig.axes:
            labels = [t.get_window_extent(renderer) for t in ax.get_yticklabels() if t.get_text()]
            for a, b in zip(labels, labels[1:]):
                assert not _overlaps(a, b), f"{path.name}: y labels overlap"
            labels = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
            for a, b in zip(labels, labels[1:]):
                assert not _overlaps(a, b), f"{path.name}: x labels overlap"
        checked.append(path.name)
        path.with_suffix(".checked").touch()  # the timelines are checked in the drawing processes
        return save(fig, path)

    monkeypatch.setattr(style, "save", checking_save)
    out = tmp_path / "out"
    argv = [*fx.many_systems(tmp_path, count, power=True), "--out", str(out), "--no-references"]
    assert fx.compare(argv) == 0
    assert len(list(out.glob("power_*.checked"))) == len(list(out.glob("power_*.png"))) == count
    assert {"bars_llm_800M_bf16_seq_2048.png", "decision_llm_800M_bf16_seq_2048.png",
            "solution_llm_800M_bf16_seq_2048.png"} <= set(checked)


def test_bar_plots_grow_in_height_not_in_width_with_more_systems(tmp_path):
    sizes = {}
    for count in (2, 6, 12):
        out = tmp_path / f"out{count}"
        assert fx.compare([*fx.many_systems(tmp_path / str(count), count), "--out", str(out),
                         "--no-references"]) == 0
        height, width, _ = matplotlib.image.imread(out / "bars_llm_800M_bf16_seq_2048.png").shape
        sizes[count] = (width, height)
    widths = [w for w, _ in sizes.values()]
    assert max(widths) - min(widths) < 0.1 * min(widths)
    assert sizes[2][1] < sizes[6][1] < sizes[12][1]


@pytest.fixture(scope="module")
def chromium():
    try:
        return browser.ensure_chromium()
    except browser.ChromiumUnavailable as err:
        pytest.skip(str(err))


@pytest.mark.parametrize("count", [1, 2, 6, 12])
def test_the_report_loads_in_headless_chromium_and_shows_the_headline(tmp_path, chromium, count):
    out = tmp_path / "out"
    argv = [*fx.many_systems(tmp_path, count, power=True), "--out", str(out), "--no-references"]
    assert fx.compare(argv) == 0
    page = browser.load(out / "report.html", tmp_path / "shot.png")
    table = page.dom.split('id="headline-table-llm"')[1].split("</table>")[0]
    assert table.count("<tr><td>") == count
    # the first screen: the decision, its ranked charts and time against energy to solution
    assert re.search(r"<h2>(.*?)</h2>", page.dom).group(1).startswith("Decision: llm, 800M bf16 seq 2048")
    decision = page.dom.split('id="decision-llm"')[1].split("</section>")[0]
    assert 'alt="decision_llm_800M_bf16_seq_2048"' in decision and 'alt="solution_llm_800M_bf16_seq_2048"' \
        in decision
    assert decision.count("<li>") == 3  # fastest per node, per package, most efficient per Wh
    # nothing failed to load, no script error, no host looked up
    assert [line for line in page.log.splitlines() if "CONSOLE" in line] == []
    assert browser.own_requests(out / "report.html", tmp_path) == frozenset()
    height, width, _ = matplotlib.image.imread(tmp_path / "shot.png").shape
    assert (width, height) == (1400, 2400)


def test_the_browser_shows_the_power_limit_frontier_after_the_decision(tmp_path, chromium):
    out = tmp_path / "out"
    argv = [*fx.sweep_demo(tmp_path), "--out", str(out), "--no-references"]
    assert fx.compare(argv) == 0
    page = browser.load(out / "report.html", tmp_path / "shot.png")
    name = report.slug("A100 llm 800M bf16 seq 2048, batch 512, 4 GPUs on 1 node")
    assert re.findall(r'<section id="(decision|frontier)-', page.dom) == ["decision", "frontier"]
    section = page.dom.split(f'id="frontier-{name}"')[1].split("</section>")[0]
    assert f'<img alt="frontier_{name}" src="data:image/png;base64,' in section
    assert "most tokens per Wh at 250 W (asked 250): 247,000 tokens/Wh, 1.28x the default limit's" in section
    assert [line for line in page.log.splitlines() if "CONSOLE" in line] == []
    height, width, _ = matplotlib.image.imread(out / f"frontier_{name}.png").shape
    assert width > 400 and height > 200


def test_the_browser_check_catches_a_page_that_fetches_from_outside_or_fails_a_script(tmp_path, chromium):
    page = tmp_path / "bad.html"
    page.write_text('<html><body><h2>x</h2><img src="https://example.invalid/a.png">'
                    '<script>nosuch();</script></body></html>')
    assert browser.own_requests(page, tmp_path) == {"https://example.invalid/a.png"}
    log = browser.load(page, tmp_path / "shot.png").log
    assert "Uncaught ReferenceError: nosuch is not defined" in log and "CONSOLE" in log


def test_the_decisions_of_three_benchmarks_print_on_at_most_four_a4_pages(tmp_path, chromium):
    # the twelve systems of the committee with their LLM and image rows, two of them with the operator's,
    # each benchmark's decision with its cost chart
    args = [*fx.committee(tmp_path), f"A100={fx.write_run(tmp_path, 'a100_fno', [fx.operator()])}",
            f"GH200={fx.write_run(tmp_path, 'gh200_fno', [fx.operator('GH200', per_s_per_device=150.0)])}"]
    out = tmp_path / "out"
    prices = fx.committee_prices(tmp_path / "prices.yaml")
    fx.compare([*args, "--out", str(out), "--reference-system", "A100", "--prices", str(prices)])
    page = (out / "report.html").read_text()
    assert [name for name in ("llm", "image", "operator") if f'id="decision-{name}"' in page] == \
        ["llm", "image", "operator"]
    assert browser.pdf_pages(out / "report.html", tmp_path / "report.pdf") <= 4
