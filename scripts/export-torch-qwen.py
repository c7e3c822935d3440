#!/usr/bin/env python3
"""Export a Qwen3-style (or Qwen2-style) decoder with PyTorch's own ONNX exporter (a test tool, not run by tests).

Random weights, written the way transformers' Qwen3 / Qwen2 modelling code computes (not esopt's builder):
Qwen3 normalises q and k per head (`q_norm`, `k_norm`, RMSNorm over head_dim) before the rotary positions and
sets head_dim apart from hidden/heads; Qwen2 has q/k/v biases and no q/k norms; Gemma (transformers' Gemma, the
first generation) has one K/V head (multi-query), RMSNorm scaling by 1 + w, embeddings × √hidden, a gelu (tanh)
MLP and a tied head, with Llama's eager attention. The attention is transformers'
eager path: `matmul(q, repeat_kv(k).transpose(2, 3)) * scaling + causal_mask[..., :T]`, softmax in float32
cast back, `matmul(·, repeat_kv(v))`, `transpose(1, 2).reshape(b, s, -1)`; the 4-D mask is built from
`attention_mask` and the cache positions as `_prepare_4d_causal_attention_mask_with_cache_position` builds it.
So the exported graph's attention differs from export-torch-llama.py's (Mul by the scale rather than Div, a
Cast around the Softmax, a sliced mask made with Trilu and a masked fill) and from the builder's.

Writes the Hugging Face / optimum decoder-with-past layout esopt loads (model.onnx, config.json, a byte-level
tokenizer.json, tokenizer_config.json) plus greedy.json: torch's own greedy continuations, decoded with its KV
cache, one prompt at a time.

    /usr/bin/python3 scripts/export-torch-qwen.py test/fixtures/torch-qwen3                  # torch 1.13 (Debian python3-torch)
    /usr/bin/python3 scripts/export-torch-qwen.py --family qwen2 test/fixtures/torch-qwen2
    /usr/bin/python3 scripts/export-torch-qwen.py --family gemma test/fixtures/torch-gemma
    /usr/bin/python3 scripts/export-torch-qwen.py --attention sdpa test/fixtures/torch-qwen3-sdpa
    /usr/bin/python3 scripts/export-torch-qwen.py --shape small --no-greedy /tmp/qwen3-small  # for benchmarks, not committed
    /usr/bin/python3 scripts/export-torch-qwen.py --shape qwen3-0.6b --tie --no-greedy /tmp/qwen3-0.6b  # Qwen3-0.6B's shape, 2.4 GB

--attention sdpa writes the attention the way torch >= 2.0 exports F.scaled_dot_product_attention (opset 14+:
Mul of q and of kᵀ by √scale, the scale computed from Shape(q)[-1], Add of the mask, Softmax, MatMul), by hand,
since torch 1.13 has no SDPA; transformers' SDPA attention and optimum's exports of it write that form.

torch 1.13 has only the TorchScript exporter (torch.onnx.export); the dynamo exporter (torch.onnx.dynamo_export,
torch >= 2.1) is not available from Debian, so its graphs are not exported here.
"""
import argparse
import json
import math
import os

import torch
from torch import nn

from byte_tokenizer import write_tokenizer

SHAPES = {
    # vocab, hidden, layers, heads, kv heads, head_dim, intermediate, max positions
    'tiny': (260, 64, 2, 4, 2, 32, 128, 256),
    'small': (260, 384, 6, 8, 4, 64, 1024, 4096),
    'qwen3-0.6b': (151936, 1024, 28, 16, 8, 128, 3072, 40960),
}
EPS, ROPE_THETA, EOS, SEED, NEW_TOKENS, OPSET = 1e-6, 1000000.0, 258, 46, 8, 17
PROMPTS = [[257, 117, 115, 101, 114, 10, 72, 105], [256, 50, 43, 50, 61], [97], [257, 97, 115, 115, 105, 115, 116, 97, 110, 116, 10, 79, 75]]


def build(family, shape, attention='eager', tie=False):
    V, D, L, H, KV, HD, I, P = SHAPES[shape]
    qk_norm, qkv_bias, gemma = family == 'qwen3', family == 'qwen2', family == 'gemma'
    if gemma:
        KV, tie = 1, True  # Gemma 2B's multi-query attention (one K/V head) and tied embedding

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            dtype = x.dtype
            x = x.to(torch.float32)
            variance = x.pow(2).mean(-1, keepdim=True)
            if gemma:  # GemmaRMSNorm: scales by (1 + w), in float32, then casts
                return ((x * torch.rsqrt(variance + EPS)) * (1.0 + self.weight.float())).to(dtype)
            return self.weight * (x * torch.rsqrt(variance + EPS)).to(dtype)

    def rotate_half(x):
        return torch.cat((-x[..., HD // 2:], x[..., : HD // 2]), dim=-1)

    def repeat_kv(x, n_rep):
        b, kv, s, d = x.shape
        if n_rep == 1:
            return x
        return x[:, :, None, :, :].expand(b, kv, n_rep, s, d).reshape(b, kv * n_rep, s, d)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.scaling = HD ** -0.5
            self.q_proj = nn.Linear(D, H * HD, bias=qkv_bias)
            self.k_proj = nn.Linear(D, KV * HD, bias=qkv_bias)
            self.v_proj = nn.Linear(D, KV * HD, bias=qkv_bias)
            self.o_proj = nn.Linear(H * HD, D, bias=False)
            if qk_norm:
                self.q_norm = RMSNorm(HD)
                self.k_norm = RMSNorm(HD)

        def forward(self, x, cos, sin, mask, past_k, past_v):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, -1, HD)
            k = self.k_proj(x).view(b, s, -1, HD)
            if qk_norm:
                q, k = self.q_norm(q), self.k_norm(k)
            q, k = q.transpose(1, 2), k.transpose(1, 2)
            v = self.v_proj(x).view(b, s, -1, HD).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = torch.cat([past_k, k], dim=-2)
            v = torch.cat([past_v, v], dim=-2)
            kk, vv = repeat_kv(k, H // KV), repeat_kv(v, H // KV)
            if attention == 'sdpa':
                # torch >= 2.0's ONNX decomposition of scaled_dot_product_attention(q, k, v, attn_mask), written out
                # (torch 1.13 has no SDPA): the default scale from Shape(q)[-1], √scale on q and on kᵀ
                scale = 1.0 / torch.sqrt(torch.ones((), dtype=q.dtype) * q.size(-1))
                w = torch.matmul(q * torch.sqrt(scale), kk.transpose(-2, -1) * torch.sqrt(scale)) + mask[:, :, :, : kk.shape[-2]]
                w = torch.softmax(w, dim=-1)
            else:
                w = torch.matmul(q, kk.transpose(2, 3)) * self.scaling
                w = w + mask[:, :, :, : kk.shape[-2]]
                w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            out = torch.matmul(w, vv).transpose(1, 2).contiguous().reshape(b, s, -1).contiguous()
            return self.o_proj(out), k, v

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate_proj = nn.Linear(D, I, bias=False)
            self.up_proj = nn.Linear(D, I, bias=False)
            self.down_proj = nn.Linear(I, D, bias=False)

        def forward(self, x):
            act = nn.functional.gelu(self.gate_proj(x), approximate='tanh') if gemma else nn.functional.silu(self.gate_proj(x))
            return self.down_proj(act * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm(D)
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm(D)
            self.mlp = MLP()

        def forward(self, x, cos, sin, mask, past_k, past_v):
            a, k, v = self.self_attn(self.input_layernorm(x), cos, sin, mask, past_k, past_v)
            x = x + a
            return x + self.mlp(self.post_attention_layernorm(x)), k, v

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(V, D)
            self.layers = nn.ModuleList([Layer() for _ in range(L)])
            self.norm = RMSNorm(D)
            self.register_buffer('inv_freq', 1.0 / ROPE_THETA ** (torch.arange(0, HD, 2).float() / HD), persistent=False)

    class ForCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Inner()
            self.lm_head = nn.Linear(D, V, bias=False)
            if tie:
                self.lm_head.weight = self.model.embed_tokens.weight  # tied by sharing the Parameter, as Qwen3-0.6B

        def forward(self, input_ids, attention_mask, position_ids, *past):
            x = self.model.embed_tokens(input_ids)
            if gemma:  # GemmaModel: the embeddings scaled by √hidden in their dtype
                x = x * torch.tensor(D ** 0.5, dtype=x.dtype)
            b, s = input_ids.shape
            past_len = past[0].shape[2]
            cache_position = torch.arange(past_len, past_len + s)
            # rotary (transformers' default rope): inv_freq @ positions, cos/sin [b, 1, s, head_dim]
            freqs = (self.model.inv_freq[None, :, None].float().expand(b, -1, 1) @ position_ids[:, None, :].float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
            # _prepare_4d_causal_attention_mask_with_cache_position (transformers 4.4x), target = the mask's length
            target = attention_mask.shape[-1]
            min_dtype = torch.finfo(x.dtype).min
            causal = torch.full((s, target), fill_value=min_dtype, dtype=x.dtype)
            causal = torch.triu(causal, diagonal=1)
            causal = causal * (torch.arange(target) > cache_position.reshape(-1, 1))
            causal = causal[None, None, :, :].expand(b, 1, -1, -1)
            padding = (causal + attention_mask[:, None, None, :].to(x.dtype)) == 0
            mask = causal.masked_fill(padding, min_dtype)
            presents = []
            for i, layer in enumerate(self.model.layers):
                x, k, v = layer(x, cos, sin, mask, past[2 * i], past[2 * i + 1])
                presents += [k, v]
            return (self.lm_head(self.model.norm(x)), *presents)

    return ForCausalLM(), (V, D, L, H, KV, HD, I, P)


@torch.no_grad()
def greedy(model, dims, prompt):
    """Token ids torch picks, prompt then one token a step through its KV cache; and the smallest top-2 gap."""
    _, _, L, _, KV, HD, _, _ = dims
    ids = torch.tensor([prompt])
    mask = torch.ones_like(ids)
    pos = torch.arange(len(prompt)).unsqueeze(0)
    past = [torch.zeros(1, KV, 0, HD) for _ in range(2 * L)]
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('out')
    ap.add_argument('--family', choices=['qwen3', 'qwen2', 'gemma'], default='qwen3')
    ap.add_argument('--shape', choices=list(SHAPES), default='tiny')
    ap.add_argument('--attention', choices=['eager', 'sdpa'], default='eager', help="sdpa: torch 2's decomposition of scaled_dot_product_attention, written out")
    ap.add_argument('--tie', action='store_true', help='tie the LM head to the embedding (Qwen3-0.6B does)')
    ap.add_argument('--no-constant-folding', action='store_true')
    ap.add_argument('--no-greedy', action='store_true', help="skip torch's greedy runs (large shapes)")
    a = ap.parse_args()
    out, fold = a.out, not a.no_constant_folding
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)
    model, dims = build(a.family, a.shape, a.attention, a.tie)
    model = model.eval()
    V, D, L, H, KV, HD, I, P = dims
    with torch.no_grad():
        for name, p in model.named_parameters():  # wider than nn.Linear's init, so greedy picks are clear-cut
            if name.endswith('norm.weight'):  # a scale near 1 either way (Gemma's norm multiplies by 1 + w)
                p.copy_((0 if a.family == 'gemma' else 1) + 0.1 * torch.randn_like(p))
            elif name.endswith('bias'):
                p.normal_(0, 0.2)
            else:
                p.normal_(0, 0.5 if 'embed' in name else (0.3 if a.shape == 'tiny' else 0.02))
    params = sum(p.numel() for p in model.parameters())

    past_len, seq = 3, 2
    names_in = ['input_ids', 'attention_mask', 'position_ids'] + [f'past_key_values.{i}.{kv}' for i in range(L) for kv in ('key', 'value')]
    names_out = ['logits'] + [f'present.{i}.{kv}' for i in range(L) for kv in ('key', 'value')]
    dyn = {'input_ids': {0: 'batch_size', 1: 'sequence_length'}, 'attention_mask': {0: 'batch_size', 1: 'total_sequence_length'},
           'position_ids': {0: 'batch_size', 1: 'sequence_length'}, 'logits': {0: 'batch_size', 1: 'sequence_length'}}
    for i in range(L):
        for kv in ('key', 'value'):
            dyn[f'past_key_values.{i}.{kv}'] = {0: 'batch_size', 2: 'past_sequence_length'}
            dyn[f'present.{i}.{kv}'] = {0: 'batch_size', 2: 'past_sequence_length + 1'}
    args = (torch.randint(0, 256, (2, seq)), torch.ones(2, past_len + seq, dtype=torch.int64),
            torch.arange(past_len, past_len + seq).repeat(2, 1), *[torch.randn(2, KV, past_len, HD) for _ in range(2 * L)])
    torch.onnx.export(model, args, os.path.join(out, 'model.onnx'), input_names=names_in, output_names=names_out,
                      dynamic_axes=dyn, opset_version=OPSET, do_constant_folding=fold)

    arch = {'qwen3': 'Qwen3ForCausalLM', 'qwen2': 'Qwen2ForCausalLM', 'gemma': 'GemmaForCausalLM'}[a.family]
    config = {
        'architectures': [arch], 'model_type': a.family, 'vocab_size': V,
        'hidden_size': D, 'intermediate_size': I, 'num_hidden_layers': L, 'num_attention_heads': H, 'num_key_value_heads': KV,
        'head_dim': HD, 'max_position_embeddings': P, 'rope_theta': ROPE_THETA, 'rms_norm_eps': EPS,
        'hidden_act': 'gelu_pytorch_tanh' if a.family == 'gemma' else 'silu',
        'attention_bias': a.family == 'qwen2', 'tie_word_embeddings': a.tie or a.family == 'gemma', 'bos_token_id': 256, 'eos_token_id': EOS, 'pad_token_id': 259,
        'torch_dtype': 'float32',
    }
    with open(os.path.join(out, 'config.json'), 'w') as f:
        json.dump(config, f, indent=2)
    write_tokenizer(out, P)

    runs = []
    if not a.no_greedy:
        for prompt in PROMPTS:
            ids, gap = greedy(model, dims, prompt)
            runs.append({'prompt': prompt, 'greedy': ids, 'min_top2_gap': round(gap, 6)})
    info = {'torch': torch.__version__, 'family': a.family, 'attention': a.attention, 'shape': a.shape, 'seed': SEED, 'opset': OPSET, 'do_constant_folding': fold,
            'parameters': params, 'new_tokens': NEW_TOKENS, 'runs': runs}
    with open(os.path.join(out, 'greedy.json'), 'w') as f:
        json.dump(info, f, indent=2)
    print(json.dumps(info))


if __name__ == '__main__':
    main()
