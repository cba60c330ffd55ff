"""build_datasets: megatron-core's GPTDataset over a .bin/.idx pair, and
synthetic tokens, with the item format the driver relies on."""

import os

import numpy as np
import pytest
import torch

from caraml.report import BenchmarkInputError
from llm_training.data import build_datasets, indexed

VOCAB = 8192
EOD = 0
SEQ = 32
N_DOCS = 200


def make_documents(n_docs=N_DOCS, seed=0):
    """Documents whose ids count up from where the previous one stopped and
    end with EOD, so an id tells which document it came from and what comes
    after it."""
    rng = np.random.default_rng(seed)
    docs, next_id = [], 1
    for _ in range(n_docs):
        n = int(rng.integers(5, 45))
        docs.append(list(range(next_id, next_id + n)) + [EOD])
        next_id += n
    assert next_id < VOCAB
    return docs


@pytest.fixture
def data(tmp_path):
    prefix = tmp_path / "corpus_text_document"
    indexed.write(make_documents(), prefix, VOCAB)
    return str(prefix)


def build(prefix, **kw):
    args = dict(data_prefix=prefix, synthetic=False, vocab_size=VOCAB, seq_length=SEQ,
                split="80,15,5", num_train_samples=50, num_valid_samples=20, seed=1234)
    args.update(kw)
    return build_datasets(**args)


def document_of(token_ids):
    """Index of the document each non-EOD id came from."""
    starts = np.cumsum([0] + [len(d) - 1 for d in make_documents()]) + 1
    ids = np.asarray(token_ids)
    return np.searchsorted(starts, ids[ids != EOD], side="right") - 1


def test_items_have_the_documented_shapes_and_next_token_labels(data):
    last_ids = torch.tensor([d[-2] for d in make_documents()])
    train, valid = build(data)
    for ds in (train, valid):
        for i in range(len(ds)):
            item = ds[i]
            assert set(item) == {"tokens", "labels", "loss_mask", "position_ids"}
            assert all(v.shape == (SEQ,) for v in item.values())
            assert item["tokens"].dtype == item["labels"].dtype == torch.int64
            assert item["loss_mask"].dtype == torch.float32 and bool((item["loss_mask"] == 1).all())
            assert item["position_ids"].tolist() == list(range(SEQ))
            tokens, labels = item["tokens"], item["labels"]
            assert torch.equal(labels[:-1], tokens[1:])
            inside = tokens != EOD  # after an EOD comes the first token of some document
            following = torch.where(torch.isin(tokens, last_ids), EOD, tokens + 1)
            assert torch.equal(labels[inside], following[inside])


def test_splits_have_the_requested_sizes_and_disjoint_documents(data):
    train, valid = build(data, num_train_samples=300, num_valid_samples=7)
    assert (len(train), len(valid)) == (300, 7)  # the train split is read over several epochs
    train_docs = np.unique(np.concatenate([document_of(train[i]["tokens"]) for i in range(300)]))
    valid_docs = np.unique(np.concatenate([document_of(valid[i]["tokens"]) for i in range(7)]))
    # split 80,15,5 of 200 documents: train 0-159, valid 160-189, test 190-199 never read
    assert train_docs.min() == 0 and train_docs.max() == 159 and len(train_docs) == 160
    assert valid_docs.min() >= 160 and valid_docs.max() <= 189


def test_same_seed_same_samples_other_seed_other_order(data, tmp_path):
    a, _ = build(data)
    b, _ = build(data, path_to_cache=str(tmp_path / "elsewhere"))
    c, _ = build(data, seed=99)
    assert os.listdir(tmp_path / "elsewhere")
    assert all(torch.equal(a[i]["tokens"], b[i]["tokens"]) for i in range(len(a)))
    assert not all(torch.equal(a[i]["tokens"], c[i]["tokens"]) for i in range(len(a)))


def test_index_caches_go_beside_the_data_by_default(data):
    build(data)
    cached = os.listdir(os.path.join(os.path.dirname(data), "cache"))
    assert any(name.endswith("GPTDataset-train-shuffle_index.npy") for name in cached)
    assert not any("-test-" in name for name in cached)  # the test split is never indexed


def test_no_validation_samples_gives_no_validation_dataset(data):
    train, valid = build(data, num_valid_samples=0)
    assert valid is None and len(train) == 50


@pytest.mark.parametrize("kw, message", [
    (dict(split="100,0,0"), r"split '100,0,0' leaves no valid documents in .*corpus_text_document "
                            r"\(200 documents in all\)"),
    (dict(split="999,1,0"), r"leaves no valid documents"),  # 0.1 % of 200 documents rounds to none
    (dict(split="train"), r"split 'train' is not up to three comma-separated weights"),
    (dict(split="0,0,0"), r"split '0,0,0' is not up to three"),
    (dict(split="1,2,3,4"), r"split '1,2,3,4' is not up to three"),
    (dict(vocab_size=100), r"corpus_text_document\.bin holds token ids from 0 to \d+, outside a "
                           r"vocabulary of 100 tokens"),
    (dict(data_prefix="/nonexistent/x_text_document"),
     r"data file /nonexistent/x_text_document\.idx does not exist"),
    (dict(synthetic=True), r"either a data prefix or synthetic data"),
    (dict(seq_length=0), r"seq_length must be at least 1, got 0"),
])
def test_bad_input_is_a_one_line_error_before_any_index_is_built(data, kw, message):
    with pytest.raises(BenchmarkInputError, match=message) as err:
        build(data, **kw)
    assert "\n" not in str(err.value)
    assert not os.path.exists(os.path.join(os.path.dirname(data), "cache"))


def test_missing_compiled_helpers_are_named(data, monkeypatch):
    import sys

    import megatron.core.datasets

    monkeypatch.delattr(megatron.core.datasets, "helpers", raising=False)
    monkeypatch.setitem(sys.modules, "megatron.core.datasets.helpers", None)  # import fails
    with pytest.raises(BenchmarkInputError, match=r"compiled dataset helpers do not import "
                                                   r".* make -C \S+/megatron/core/datasets"):
        build(data)


def test_a_corrupt_index_is_reported_as_ours_not_megatrons(data):
    idx = indexed.paths(data)[1]
    idx.write_bytes(idx.read_bytes()[:-16])
    with pytest.raises(BenchmarkInputError,
                       match=r"corpus_text_document\.idx is truncated or corrupt"):
        build(data)


def test_prefix_given_with_a_file_suffix_is_accepted(data):
    a, _ = build(data + ".bin")
    b, _ = build(data)
    assert torch.equal(a[3]["tokens"], b[3]["tokens"])


def test_a_cache_folder_that_cannot_be_made_is_a_clear_error(data, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(BenchmarkInputError,
                       match=r"could not build its index cache in .*a_file/cache"):
        build(data, path_to_cache=str(blocker / "cache"))


# --- synthetic --------------------------------------------------------------

def synthetic(**kw):
    args = dict(data_prefix=None, synthetic=True, vocab_size=VOCAB, seq_length=SEQ,
                num_train_samples=40, num_valid_samples=8, seed=7)
    args.update(kw)
    return build_datasets(**args)


def test_synthetic_items_match_the_real_ones_in_form():
    train, valid = synthetic()
    assert (len(train), len(valid)) == (40, 8)
    item = train[5]
    assert set(item) == {"tokens", "labels", "loss_mask", "position_ids"}
    assert all(v.shape == (SEQ,) for v in item.values())
    assert item["tokens"].dtype == torch.int64 and item["loss_mask"].dtype == torch.float32
    assert torch.equal(item["labels"][:-1], item["tokens"][1:])
    everything = torch.cat([train[i]["tokens"] for i in range(len(train))])
    assert everything.min() >= 0 and everything.max() < VOCAB
    assert len(everything.unique()) > len(everything) // 2  # random, not a pattern
    with pytest.raises(IndexError):
        train[40]


def test_synthetic_tokens_are_fixed_by_the_seed():
    a, va = synthetic()
    b, vb = synthetic()
    c, _ = synthetic(seed=8)
    assert all(torch.equal(a[i]["tokens"], b[i]["tokens"]) for i in range(40))
    assert torch.equal(va[0]["tokens"], vb[0]["tokens"])
    assert not torch.equal(a[0]["tokens"], c[0]["tokens"])
    assert not torch.equal(a[0]["tokens"], va[0]["tokens"])  # validation is another stream
    assert synthetic(num_valid_samples=0)[1] is None


# --- several processes --------------------------------------------------------

def _rank_main(rank, world, prefix, init_file, out_dir):
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}",
                                         rank=rank, world_size=world)
    train, _ = build(prefix, num_valid_samples=0)
    torch.save(torch.stack([train[i]["tokens"] for i in range(len(train))]),
               os.path.join(out_dir, f"rank{rank}.pt"))
    torch.distributed.destroy_process_group()


def test_ranks_share_one_index_built_by_rank_zero(data, tmp_path):
    # fork: the ranks inherit the imported torch and megatron-core, which
    # would take most of this test's time to import again.
    torch.multiprocessing.start_processes(
        _rank_main, args=(2, data, str(tmp_path / "init"), str(tmp_path)), nprocs=2,
        start_method="fork")
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    assert torch.equal(rank0, rank1)
    single, _ = build(data, num_valid_samples=0)
    assert torch.equal(rank0, torch.stack([single[i]["tokens"] for i in range(len(single))]))


def test_micro_batches_go_on_past_the_samples_the_dataset_was_sized_for():
    """A measurement window runs past the planned iterations: the same
    samples again, never an end of the data."""
    from llm_training.batches import micro_batches

    train, _ = build_datasets(data_prefix=None, synthetic=True, vocab_size=64, seq_length=8,
                              split="100,0,0", num_train_samples=4, num_valid_samples=0, seed=1)
    batches = micro_batches(train, micro_batch_size=2, data_parallel=1, data_parallel_rank=0,
                            num_workers=0, device=torch.device("cpu"))
    tokens = [next(batches)["tokens"] for _ in range(5)]  # two batches make the dataset
    assert torch.equal(tokens[0], tokens[2]) and torch.equal(tokens[1], tokens[3])
