/**
 * One sampling seed per (member, episode, turn): an episode replays exactly when its member, its episode
 * number and the turn are the same, whatever else is being served at the time. Philox mixes the words, so
 * neighbouring episodes or turns do not get correlated streams.
 */
import { philox4x32 } from '../../../shared/philox.ts';
import type { MemberSelector } from '../engine.ts';

const SALT = 0x5a3d1e57;
const BASE_WORD = 0xffffffff; // member words for the base model: outside MemberIndex's range

export function samplingSeed(member: MemberSelector, episode: number, turn: number): number {
  const [iteration, index] = member.kind === 'base' ? [BASE_WORD, BASE_WORD] : [member.iteration, member.index];
  const out = new Uint32Array(4);
  philox4x32(turn >>> 0, episode >>> 0, index >>> 0, iteration >>> 0, Math.floor(episode / 2 ** 32) >>> 0, SALT, out);
  return out[0];
}
