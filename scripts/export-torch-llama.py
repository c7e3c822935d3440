#!/usr/bin/env python3
"""Export a tiny tied-embedding Llama-style decoder with PyTorch's own ONNX exporter (a test tool, not run by tests).

Writes the Hugging Face / optimum decoder-with-past layout esopt loads (model.onnx, config.json, a byte-level
tokenizer.json, tokenizer_config.json) plus greedy.json: torch's own greedy continuations, decoded with its KV
cache, so test/model/torch-export.test.ts compares the loader against the framework without Python.
The LM head shares the embedding Parameter (`lm_head.weight = embed_tokens.weight`), as transformers ties it.

    python3 scripts/export-torch-llama.py test/fixtures/torch-llama-tied   # torch 1.13 (Debian python3-torch)
    python3 scripts/export-torch-llama.py --no-constant-folding test/fixtures/torch-llama-tied-unfolded
"""
import json
import math
import os
import sys

import torch
from torch import nn

from byte_tokenizer import write_tokenizer

VOCAB, HIDDEN, LAYERS, HEADS, KV_HEADS, INTER, MAX_POS = 260, 64, 2, 4, 2, 128, 128
HEAD_DIM = HIDDEN // HEADS
EPS, ROPE_THETA, EOS, SEED, NEW_TOKENS = 1e-6, 10000.0, 258, 20, 8
PROMPTS = [[256, 72, 101, 108, 108, 111], [257, 117, 115, 101, 114, 10, 50, 43, 50, 61], [97]]


class RMSNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(HIDDEN))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


def rotate_half(x):
    return torch.cat((-x[..., HEAD_DIM // 2:], x[..., : HEAD_DIM // 2]), dim=-1)


def repeat_kv(x):
    """transformers' repeat_kv: each kv head serves HEADS / KV_HEADS query heads."""
    b, kv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, HEADS // KV_HEADS, s, d).reshape(b, HEADS, s, d)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = nn.Linear(HIDDEN, HEADS * HEAD_DIM, bias=False)
        self.k_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.v_proj = nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM, bias=False)
        self.o_proj = nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)

    def forward(self, x, cos, sin, mask, past_k, past_v):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k_proj(x).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v_proj(x).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        kk, vv = repeat_kv(k), repeat_kv(v)
        scores = q @ kk.transpose(2, 3) / math.sqrt(HEAD_DIM) + mask
        out = torch.softmax(scores, dim=-1) @ vv
        return self.o_proj(out.transpose(1, 2).reshape(b, s, HIDDEN)), k, v


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = nn.Linear(HIDDEN, INTER, bias=False)
        self.up_proj = nn.Linear(HIDDEN, INTER, bias=False)
        self.down_proj = nn.Linear(INTER, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm()
        self.self_attn = Attention()
        self.post_attention_layernorm = RMSNorm()
        self.mlp = MLP()

    def forward(self, x, cos, sin, mask, past_k, past_v):
        a, k, v = self.self_attn(self.input_layernorm(x), cos, sin, mask, past_k, past_v)
        x = x + a
        return x + self.mlp(self.post_attention_layernorm(x)), k, v


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList([Layer() for _ in range(LAYERS)])
        self.norm = RMSNorm()
        self.register_buffer('inv_freq', 1.0 / ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM), persistent=False)


class LlamaForCausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Inner()
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)
        self.lm_head.weight = self.model.embed_tokens.weight  # tied by sharing the Parameter

    def forward(self, input_ids, attention_mask, position_ids, *past):
        x = self.model.embed_tokens(input_ids)
        s = input_ids.shape[1]
        total = attention_mask.shape[1]
        # rotary: angles [b, s, head_dim/2] from the positions, broadcast over heads
        freqs = position_ids.unsqueeze(-1).float() * self.model.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)
        cos, sin = emb.cos(), emb.sin()
        # causal over the absolute slot index (left padding) and the padding mask, additive
        q_idx = torch.arange(s).unsqueeze(-1) + (total - s)
        k_idx = torch.arange(total).unsqueeze(0)
        allowed = (k_idx <= q_idx).unsqueeze(0).unsqueeze(0) & (attention_mask[:, None, None, :] > 0)
        mask = torch.zeros(allowed.shape, dtype=x.dtype).masked_fill(~allowed, torch.finfo(x.dtype).min)
        presents = []
        for i, layer in enumerate(self.model.layers):
            x, k, v = layer(x, cos, sin, mask, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        return (self.lm_head(self.model.norm(x)), *presents)


def empty_past(batch):
    return [torch.zeros(batch, KV_HEADS, 0, HEAD_DIM) for _ in range(2 * LAYERS)]


@torch.no_grad()
def greedy(model, prompt):
    """Token ids torch picks, prompt then one token a step through its KV cache; and the smallest top-2 gap."""
    ids = torch.tensor([prompt])
    mask = torch.ones_like(ids)
    pos = torch.arange(len(prompt)).unsqueeze(0)
    past = empty_past(1)
    out, gap = [], math.inf
    for _ in range(NEW_TOKENS):
        logits, *past = model(ids, mask, pos, *past)
        top = torch.topk(logits[0, -1], 2).values
        gap = min(gap, float(top[0] - top[1]))
        nxt = int(torch.argmax(logits[0, -1]))
        out.append(nxt)
        ids = torch.tensor([[nxt]])
        pos = pos[:, -1:] + 1
        mask = torch.cat([mask, torch.ones(1, 1, dtype=mask.dtype)], dim=1)
    return out, gap


def main(out, fold):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)
    model = LlamaForCausalLM().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():  # wider than nn.Linear's init, so greedy picks are clear-cut
            if name.endswith('norm.weight'):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0, 0.5 if 'embed' in name else 0.3)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    params = sum(p.numel() for p in model.parameters())  # a shared Parameter counts once

    past_len, seq = 3, 2
    names_in = ['input_ids', 'attention_mask', 'position_ids'] + [f'past_key_values.{i}.{kv}' for i in range(LAYERS) for kv in ('key', 'value')]
    names_out = ['logits'] + [f'present.{i}.{kv}' for i in range(LAYERS) for kv in ('key', 'value')]
    dyn = {'input_ids': {0: 'batch_size', 1: 'sequence_length'}, 'attention_mask': {0: 'batch_size', 1: 'total_sequence_length'},
           'position_ids': {0: 'batch_size', 1: 'sequence_length'}, 'logits': {0: 'batch_size', 1: 'sequence_length'}}
    for i in range(LAYERS):
        for kv in ('key', 'value'):
            dyn[f'past_key_values.{i}.{kv}'] = {0: 'batch_size', 2: 'past_sequence_length'}
            dyn[f'present.{i}.{kv}'] = {0: 'batch_size', 2: 'past_sequence_length + 1'}
    args = (torch.randint(0, VOCAB, (2, seq)), torch.ones(2, past_len + seq, dtype=torch.int64),
            torch.arange(past_len, past_len + seq).repeat(2, 1), *[torch.randn(2, KV_HEADS, past_len, HEAD_DIM) for _ in range(2 * LAYERS)])
    torch.onnx.export(model, args, os.path.join(out, 'model.onnx'), input_names=names_in, output_names=names_out,
                      dynamic_axes=dyn, opset_version=14, do_constant_folding=fold)

    config = {
        'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'vocab_size': VOCAB, 'hidden_size': HIDDEN, 'intermediate_size': INTER,
        'num_hidden_layers': LAYERS, 'num_attention_heads': HEADS, 'num_key_value_heads': KV_HEADS, 'head_dim': HEAD_DIM,
        'max_position_embeddings': MAX_POS, 'rope_theta': ROPE_THETA, 'rms_norm_eps': EPS, 'hidden_act': 'silu',
        'tie_word_embeddings': True, 'bos_token_id': 256, 'eos_token_id': EOS, 'pad_token_id': 259, 'torch_dtype': 'float32',
    }
    with open(os.path.join(out, 'config.json'), 'w') as f:
        json.dump(config, f, indent=2)
    write_tokenizer(out, MAX_POS)

    runs = []
    for prompt in PROMPTS:
        ids, gap = greedy(model, prompt)
        runs.append({'prompt': prompt, 'greedy': ids, 'min_top2_gap': round(gap, 6)})
    info = {'torch': torch.__version__, 'seed': SEED, 'opset': 14, 'do_constant_folding': fold, 'parameters': params, 'new_tokens': NEW_TOKENS, 'runs': runs}
    with open(os.path.join(out, 'greedy.json'), 'w') as f:
        json.dump(info, f, indent=2)
    print(json.dumps(info))


if __name__ == '__main__':
    args = [a for a in sys.argv[1:] if a != '--no-constant-folding']
    main(args[0] if args else 'test/fixtures/torch-llama-tied', '--no-constant-folding' not in sys.argv)
