import random

from transformers import AutoTokenizer

from agent.kit import tokenizer


def test_round_trip_of_text_and_every_byte():
    text = "def f(x):\n    return x  # ünïcode ✓ 🐍\n"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    every = bytes(range(256))
    ids = tokenizer.encode(every)
    assert ids == [b + tokenizer.OFFSET for b in every]
    assert tokenizer.decode_bytes(ids) == every
    assert max(ids) == tokenizer.VOCAB_SIZE - 1


def test_random_bytes_round_trip():
    rng = random.Random(0)
    for _ in range(50):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        assert tokenizer.decode_bytes(tokenizer.encode(data)) == data


def test_special_tokens_are_dropped_and_cut_characters_replaced():
    ids = tokenizer.encode("ab") + [tokenizer.EOS_ID, tokenizer.PAD_ID]
    assert tokenizer.decode(ids) == "ab"
    cut = tokenizer.encode("é")[:1]
    assert tokenizer.decode(cut) == "\ufffd"


def test_saved_tokenizer_matches_hf(tmp_path):
    tokenizer.save_tokenizer(tmp_path)
    hf = AutoTokenizer.from_pretrained(tmp_path)
    text = "SELECT * FROM t; -- ça va\n"
    assert hf(text, add_special_tokens=False).input_ids == tokenizer.encode(text)
    assert hf.decode(tokenizer.encode(text)) == text
    assert hf.eos_token_id == tokenizer.EOS_ID and hf.pad_token_id == tokenizer.PAD_ID
