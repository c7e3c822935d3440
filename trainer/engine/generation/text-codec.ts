/** What generation needs of a tokenizer: text in, text out, and which ids are special. The model's ChatTokenizer is one. */
export interface TextCodec {
  encode(text: string): number[];
  decode(ids: number[]): string;
  readonly specialIds: ReadonlySet<number>;
}
