"""Shared test fakes and builders (imported as `helpers.<module>`; tests/ is on sys.path):

    tinymodel     a tiny random Llama and its tokenizer, built in seconds
    report_runs   every kind of run folder `evalkit report` reads, on the tiny model
    checkpoints   hand-written safetensors checkpoints with planted changes (evalkit diff)
    fake_vllm     vLLM's documented output shapes (Logprob, CompletionOutput, RequestOutput)
    locking       a folder's lock held by another process
    refusals      the bad-input tables' check: one line, exit 2, nothing written
"""
