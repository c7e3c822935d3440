/** Finds the submitted code in a reply: the last fenced code block, or the whole reply if it defines the function. */
export function extractCode(text: string, functionName: string): string | null {
  const blocks = [...text.matchAll(/```[ \t]*(?:js|javascript|ts|typescript)?[^\n]*\n([\s\S]*?)```/gi)].map((m) => m[1]);
  if (blocks.length > 0) return blocks[blocks.length - 1];
  return new RegExp(`\\b${functionName}\\b`).test(text) && /[{}]|=>/.test(text) ? text : null;
}
