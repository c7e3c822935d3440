/** The web action language and the text view parser, as pure functions. */
import { describe, expect, it } from 'vitest';
import { parseAction } from '../../environments/web/action.ts';
import { attribute, parsePageView } from '../../environments/web/page-view.ts';

const p = (text: string) => parseAction({ text, tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 });

describe('web actions', () => {
  it('parses every action form', () => {
    expect(p('click 3')).toEqual({ ok: true, action: { kind: 'click', id: 3 } });
    expect(p('CLICK [12]')).toEqual({ ok: true, action: { kind: 'click', id: 12 } });
    expect(p('check 4')).toEqual({ ok: true, action: { kind: 'check', id: 4 } });
    expect(p('type 2 "say \\"hi\\" there"')).toEqual({ ok: true, action: { kind: 'type', id: 2, text: 'say "hi" there' } });
    expect(p('type 2 ""')).toEqual({ ok: true, action: { kind: 'type', id: 2, text: '' } });
    expect(p('select 5 "New Zealand"')).toEqual({ ok: true, action: { kind: 'select', id: 5, text: 'New Zealand' } });
    expect(p('scroll down')).toEqual({ ok: true, action: { kind: 'scroll', direction: 'down' } });
    expect(p('press enter')).toEqual({ ok: true, action: { kind: 'press', key: 'Enter' } });
    expect(p('`done`')).toEqual({ ok: true, action: { kind: 'done' } });
    expect(p('The field is empty, so:\ntype 1 "x"')).toEqual({ ok: true, action: { kind: 'type', id: 1, text: 'x' } });
  });

  it('explains what is wrong with a malformed action', () => {
    expect(p('')).toMatchObject({ ok: false, error: expect.stringMatching(/empty reply/) });
    expect(p('click three')).toMatchObject({ ok: false, error: expect.stringMatching(/click needs one element id/) });
    expect(p('type 1 hello')).toMatchObject({ ok: false, error: expect.stringMatching(/quoted string/) });
    expect(p('scroll left')).toMatchObject({ ok: false, error: expect.stringMatching(/scroll needs a direction/) });
    expect(p('done now')).toMatchObject({ ok: false, error: expect.stringMatching(/takes no arguments/) });
    expect(p('fly 3')).toMatchObject({ ok: false, error: expect.stringMatching(/unknown action "fly 3"/) });
  });
});

describe('web text view', () => {
  it('reads elements, attributes, text and the scroll state back', () => {
    const view = parsePageView(
      ['Goal: x', 'Page "Form" (lines 16-45 of 80; more above; more below)', 'heading "Register"', '[3] textbox "Name \\"nick\\"" value="Ada" focused', '[4] select "Country" selected="Peru" options="Chile | Peru"', '[5] checkbox "Terms" unchecked'].join('\n'),
    );
    expect(view.moreAbove && view.moreBelow).toBe(true);
    expect(view.texts).toEqual(['Register']);
    expect(view.elements.map((e) => [e.id, e.role, e.label])).toEqual([[3, 'textbox', 'Name "nick"'], [4, 'select', 'Country'], [5, 'checkbox', 'Terms']]);
    expect(attribute(view.elements[0], 'value')).toBe('Ada');
    expect(attribute(view.elements[1], 'options')).toBe('Chile | Peru');
    expect(attribute(view.elements[2], 'value')).toBeUndefined();
  });
});
