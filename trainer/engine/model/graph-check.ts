/**
 * Checks that a decoder graph speaks the IO contract of Hugging Face / optimum decoder exports (the one
 * generation loop serves built and downloaded models alike), with errors that name the tensor or op.
 */
import { eosTokenIds, type ModelConfig } from './config.ts';
import { MERGED } from './export-layout.ts';
import { DataType, DataTypeName, type ModelProto, type ValueInfoProto } from '../onnx/proto.ts';

const KNOWN_DOMAINS = new Set(['', 'ai.onnx', 'com.microsoft']);

function elemType(v: ValueInfoProto): number | undefined {
  return v.type?.tensorType?.elemType;
}

export function checkDecoderGraph(model: ModelProto, config: ModelConfig, file: string): void {
  const g = model.graph;
  const initializers = new Set(g.initializer.map((t) => t.name));
  const inputs = new Map(g.input.filter((i) => !initializers.has(i.name)).map((i) => [i.name, i]));
  const outputs = new Map(g.output.map((o) => [o.name, o]));
  const need = (map: Map<string, ValueInfoProto>, name: string, kind: string, type: number | readonly number[]) => {
    const v = map.get(name);
    if (!v) throw new Error(`${file}: graph has no ${kind} "${name}" (expected the Hugging Face / optimum decoder IO names)`);
    const t = elemType(v);
    const ok = typeof type === 'number' ? [type] : type;
    if (t !== undefined && !ok.includes(t)) throw new Error(`${file}: ${kind} "${name}" is ${DataTypeName[t] ?? t}, expected ${ok.map((k) => DataTypeName[k]).join(' or ')}`);
  };
  const FLOATS: readonly number[] = [DataType.FLOAT, DataType.FLOAT16];
  need(inputs, 'input_ids', 'input', DataType.INT64);
  need(inputs, 'attention_mask', 'input', DataType.INT64);
  need(outputs, 'logits', 'output', FLOATS);
  // the KV caches are fed back as they come out, so every one has the first one's dtype
  const kvType = elemType(inputs.get('past_key_values.0.key') ?? { name: '' }) ?? DataType.FLOAT;
  const expected = new Set(['input_ids', 'attention_mask', 'position_ids']);
  for (let i = 0; i < config.num_hidden_layers; i++) {
    for (const kv of ['key', 'value']) {
      need(inputs, `past_key_values.${i}.${kv}`, 'input', FLOATS.includes(kvType) ? kvType : FLOATS);
      need(outputs, `present.${i}.${kv}`, 'output', FLOATS.includes(kvType) ? kvType : FLOATS);
      expected.add(`past_key_values.${i}.${kv}`);
    }
  }
  if (inputs.has('use_cache_branch')) throw new Error(`${file}: graph input "use_cache_branch" makes this ${MERGED}`);
  for (const name of inputs.keys()) {
    if (!expected.has(name)) throw new Error(`${file}: unexpected graph input "${name}" (esopt feeds input_ids, attention_mask, position_ids and past_key_values.{0..${config.num_hidden_layers - 1}}.key|value)`);
  }
  for (const n of g.node) {
    const domain = n.domain ?? '';
    if (!KNOWN_DOMAINS.has(domain)) throw new Error(`${file}: node "${n.name ?? n.opType}" uses op ${domain}.${n.opType}, a domain onnxruntime's CPU provider does not implement (supported: the default ONNX domain and com.microsoft)`);
  }
  if (config.vocab_size < 1 || eosTokenIds(config).some((id) => id >= config.vocab_size)) throw new Error(`${file.replace(/model\.onnx$/, 'config.json')}: eos_token_id outside vocab_size ${config.vocab_size}`);
}
