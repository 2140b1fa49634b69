"""The page of `demo.py view` shows the truth: its data is what the token-by-token MSRNN held, and a
real browser (headless Chromium) draws exactly that, with no script error."""
from html.parser import HTMLParser

import pytest

import demo
from lab import experiments
from lab import harness
import msrnn
from lab import specs
from conftest import random_model, tiny_config, tokens

SIZE, T = 6, 30
MODEL = random_model(tiny_config())


class Tokenizer:  # what experiments.view needs of one: a token's text
    def decode(self, ids):
        return "".join("\n" if i % 7 == 0 else f"w{i} " for i in ids)


def held_by_the_run(policy, ids):
    """held[layer][t]: the positions in the first KV head's multi-state after step t, token by token."""
    state, out = msrnn.init_state(MODEL, 1, SIZE), [[] for _ in range(MODEL.config.n_layers)]
    for t in range(ids.shape[1]):
        msrnn.feed(MODEL, ids[:, t:t + 1], state, policy)
        for layer, ms in enumerate(state):
            pos = ms.pos[0, 0, :ms.n]
            out[layer].append(set(pos[pos >= 0].tolist()))
    return out


def held_in_the_data(data, p, layer, t):
    return {j for j, d in enumerate(data["policies"][p]["dropped_at"][layer]) if j <= t < d}


@pytest.fixture(scope="module")
def data():
    ids = tokens(1, T)
    every = list(specs.POLICIES)  # every built-in, the lookahead too
    return ids, every, experiments.view(MODEL, Tokenizer(), ids[0], names=every, size=SIZE)


def test_the_page_data_is_what_the_recurrent_run_held(data):
    ids, names, data = data
    assert len(data["tokens"]) == T and data["size"] == SIZE
    for p, name in enumerate(names):
        run = held_by_the_run(specs.named(name).on(MODEL, ids), ids)
        for layer in range(MODEL.config.n_layers):
            for t in range(T):
                assert held_in_the_data(data, p, layer, t) == run[layer][t], f"{name}, layer {layer}, step {t}"
        scores = data["policies"][p]["score"]
        assert all((s is None) == (d == T) for row, drops in zip(scores, data["policies"][p]["dropped_at"])
                   for s, d in zip(row, drops)), f"{name}: a score for every drop, none for the rows kept"


class Page(HTMLParser):
    """From the DOM Chromium dumps: each panel's data-held, and each token span's classes."""
    def __init__(self, dom):
        super().__init__()
        self.panels, self.errors, self._in = [], "", None
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.panels.append({"held": int(attrs.get("data-held", -1)), "spans": []})
        elif tag == "span" and "tok" in attrs.get("class", "").split():
            self.panels[-1]["spans"].append(set(attrs["class"].split()))
        self._in = attrs.get("id")

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, text):
        if self._in == "errors":
            self.errors += text


def test_a_real_browser_draws_what_the_data_says(data, tmp_path):
    if harness.chromium() is None:
        pytest.skip("no Chromium here (Debian: apt-get install chromium; .ci/run installs it where it can)")
    _, names, data = data
    page = demo.write_page(data, tmp_path / "view.html")
    tova, sink = names.index("tova"), names.index("sink")
    for layer, step in [(0, 20), (1, 20), (1, 3)]:
        dom = Page(harness.browse(page, f"a={tova}&b={sink}&layer={layer}&step={step}"))
        assert dom.errors == "", dom.errors
        assert len(dom.panels) == 2
        for panel, p in zip(dom.panels, (tova, sink)):
            shown = {j for j, classes in enumerate(panel["spans"]) if "held" in classes}
            assert shown == held_in_the_data(data, p, layer, step), f"layer {layer}, step {step}"
            assert panel["held"] == len(shown) == min(step + 1, SIZE)  # a full multi-state holds `size` rows
            assert {j for j, classes in enumerate(panel["spans"]) if "future" in classes} == set(range(step + 1, T))
            differs = {j for j, classes in enumerate(panel["spans"]) if "differs" in classes}
            assert differs == held_in_the_data(data, tova, layer, step) ^ held_in_the_data(data, sink, layer, step)
    harness.browse(page, "layer=-1&step=25", screenshot=tmp_path / "view.png")  # all layers
    assert (tmp_path / "view.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
