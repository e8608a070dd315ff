"""Tokenizers, by what they tokenize: IR prompts for the core (`prompts`), text without a
vocabulary (`words`), text with the model's vocabulary, locally or by the engine
(`text`), chat messages (`chat`) and modelled segments for real engines (`segments`)."""
