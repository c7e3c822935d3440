/**
 * The one export layout esopt loads, named in the errors for the layouts it refuses: a decoder with past
 * inputs and no use_cache_branch, saved as model.onnx (+ external data) beside config.json and the tokenizer.
 */
/** The command that writes that layout. */
export const EXPORT_COMMAND = '`optimum-cli export onnx --model <model> --task text-generation-with-past <dir>` (optimum ≥ 1.14 writes one model.onnx with past_key_values inputs)';
/** Why a merged decoder is refused, and what to export instead. */
export const MERGED = `a merged decoder (use_cache_branch selects one of two subgraphs), which esopt does not load: its weights are read inside If branches that the perturbation rewrites do not reach. Export the decoder with past alone: ${EXPORT_COMMAND}, or with an older optimum \`--no-post-process\` and use decoder_with_past_model.onnx as model.onnx`;
