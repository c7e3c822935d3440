/** The system message composed from instructions (c_t), and the bounds a push and a request are held to. */
import { describe, expect, it } from 'vitest';
import { systemMessage } from '../../environments/system-message.ts';
import { INSTRUCTIONS_LIMITS, Instructions } from '../../shared/schemas/index.ts';
import { formatIssues } from '../../shared/validation.ts';

const ENV = 'Reply with one move: place ROW COL DIGIT.';

describe('systemMessage', () => {
  it('is the environment prompt alone without instructions', () => {
    expect(systemMessage(ENV)).toBe(ENV);
  });

  it('puts the environment prompt wherever {{environment}} stands, and nowhere else', () => {
    expect(systemMessage(ENV, Instructions.parse({ system: 'A {{environment}} B {{environment}}' }))).toBe(`A ${ENV} B ${ENV}`);
    expect(systemMessage(ENV, Instructions.parse({ system: 'Only this.' }))).toBe('Only this.');
  });

  it('keeps the environment prompt when there is no system text, the skills after it in order', () => {
    const text = systemMessage(ENV, Instructions.parse({ skills: [{ name: 'b', text: 'second' }, { name: 'a', text: 'first?' }] }));
    expect(text).toBe(`${ENV}\n\n## Skill: b\n\nsecond\n\n## Skill: a\n\nfirst?`);
  });
});

describe('Instructions bounds', () => {
  it('names the field of a document too large, a skill twice, and empty instructions', () => {
    const big = 'x'.repeat(INSTRUCTIONS_LIMITS.systemBytes + 1);
    expect(formatIssues(Instructions.safeParse({ system: big }).error!)).toMatch(/^system: is 32769 bytes; at most 32768/);
    expect(formatIssues(Instructions.safeParse({ skills: [{ name: 's', text: 'a' }, { name: 's', text: 'b' }] }).error!)).toMatch(/skills\.1\.name: skill "s" is there twice/);
    expect(Instructions.safeParse({}).success).toBe(false);
    const skills = Array.from({ length: 3 }, (_, i) => ({ name: `s${i}`, text: 'y'.repeat(30 * 1024) }));
    expect(formatIssues(Instructions.safeParse({ skills }).error!)).toMatch(/the documents are 92160 bytes together; at most 65536/);
  });
});
