"""The GPT-2 BPE encoding's sizes (tiktoken's `gpt2`, or `r50k_base`, the same ranks), free of tiktoken and
torch: `prepare` checks the encoding it loads against them (prepare/tokenizer.py) and `plan` sizes a run's
embeddings and LM head by them, without loading the encoding."""

EOT_TOKEN = 50256  # <|endoftext|>, the last rank
VOCAB_SIZE = 50257  # 50,256 ranks and <|endoftext|>
