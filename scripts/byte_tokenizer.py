"""The byte-level tokenizer files the PyTorch exporter scripts write beside their models (a test tool).

256 byte tokens in GPT-2's byte-to-unicode order, then four ChatML specials, no merges: tokenizer.json and a
tokenizer_config.json with the ChatML template, the layout Hugging Face's fast tokenizers and esopt load.
"""
import json
import os


def bytes_to_unicode():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    table, extra = [], 0
    for b in range(256):
        if b in printable:
            table.append(chr(b))
        else:
            table.append(chr(256 + extra))
            extra += 1
    return table


SPECIALS = [(256, '<|endoftext|>'), (257, '<|im_start|>'), (258, '<|im_end|>'), (259, '<|pad|>')]
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def write_tokenizer(out, max_pos):
    vocab = {ch: b for b, ch in enumerate(bytes_to_unicode())}
    vocab.update({content: i for i, content in SPECIALS})
    byte_level = {'type': 'ByteLevel', 'add_prefix_space': False, 'trim_offsets': True, 'use_regex': False}
    tok = {
        'version': '1.0', 'truncation': None, 'padding': None,
        'added_tokens': [{'id': i, 'content': c, 'single_word': False, 'lstrip': False, 'rstrip': False, 'normalized': False, 'special': True} for i, c in SPECIALS],
        'normalizer': None, 'pre_tokenizer': byte_level, 'post_processor': None, 'decoder': byte_level,
        'model': {'type': 'BPE', 'dropout': None, 'unk_token': None, 'continuing_subword_prefix': None, 'end_of_word_suffix': None,
                  'fuse_unk': False, 'byte_fallback': False, 'ignore_merges': False, 'vocab': vocab, 'merges': []},
    }
    with open(os.path.join(out, 'tokenizer.json'), 'w') as f:
        json.dump(tok, f, ensure_ascii=False)
    cfg = {'tokenizer_class': 'PreTrainedTokenizerFast', 'bos_token': '<|endoftext|>', 'eos_token': '<|im_end|>', 'pad_token': '<|pad|>',
           'unk_token': None, 'model_max_length': max_pos, 'add_bos_token': False, 'chat_template': CHATML}
    with open(os.path.join(out, 'tokenizer_config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
