"""The files behind the HPC default (`--corpus oscar`): the corpus and the
GPT-2 tokenizer that the CARAML paper used, with their checksums."""

from llm_training.data.download import Source

# Upstream CARAML trained on the first 790 records (about 10 MB) of this 1 GB
# OSCAR sample. No SHA-256 for it is published anywhere we could find, so the
# first download's checksum is recorded and enforced from then on.
OSCAR = Source(
    url="https://huggingface.co/bigscience/misc-test-data/resolve/main/stas/oscar-1GB.jsonl.xz",
    filename="oscar-1GB.jsonl.xz",
    sha256=None,
)
OSCAR_DOCUMENTS = 790
OSCAR_JSON_KEY = "text"

# OpenAI's original GPT-2 encoder.json (= vocab.json) and vocab.bpe
# (= merges.txt). tiktoken pins these SHA-256 values for the same URLs
# (tiktoken_ext/openai_public.py, gpt2()).
GPT2_VOCAB = Source(
    url="https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json",
    filename="gpt2-vocab.json",
    sha256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
)
GPT2_MERGES = Source(
    url="https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe",
    filename="gpt2-merges.txt",
    sha256="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
)
