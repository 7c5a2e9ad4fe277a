"""Decoder-only transformers, dense (GPT, Llama, Nemotron) and mixture-of-experts (Mixtral, DeepSeek-V3, Qwen3)."""
