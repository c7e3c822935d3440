/**
 * The export layout esopt works on, named in the errors for the layouts it refuses: a decoder with past
 * inputs and no use_cache_branch (as model.onnx, or inlined from a merged decoder), with external data,
 * config.json and the tokenizer beside it.
 */
/** The command that writes that layout. */
export const EXPORT_COMMAND = '`optimum-cli export onnx --model <model> --task text-generation-with-past <dir>` (optimum ≥ 1.14 writes one model.onnx with past_key_values inputs)';
/** Why a merged decoder is refused, and what to export instead. */
export const MERGED = `a merged decoder that esopt cannot inline (it loads one If on use_cache_branch whose then_branch is the decoder with past, as optimum writes). Export the decoder with past alone: ${EXPORT_COMMAND}, or with an older optimum \`--no-post-process\` and use decoder_with_past_model.onnx`;
