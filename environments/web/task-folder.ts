/**
 * Files of a task folder a user has (a MiniWoB++ checkout's `miniwob/` directory), served to the browser as
 * they are. A request path is resolved inside the folder and refused if it leaves it — by `..`, an absolute
 * path or a symbolic link pointing out — and only regular files up to a bound are read.
 */
import { readFile, realpath, stat } from 'node:fs/promises';
import { extname, isAbsolute, join, relative, sep } from 'node:path';

/** The most one served file may weigh (MiniWoB's largest assets are well under it). */
export const MAX_FOLDER_FILE_BYTES = 8 * 1024 * 1024;

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.svg': 'image/svg+xml',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
};

function inside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel !== '' && !rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel);
}

/** The file at `requestPath` under `dir`, or null when there is none there (or it would leave the folder). */
export async function folderFile(dir: string, requestPath: string): Promise<{ body: Uint8Array<ArrayBuffer>; contentType: string } | null> {
  let decoded: string;
  try {
    decoded = decodeURIComponent(requestPath);
  } catch {
    return null;
  }
  if (decoded.includes('\0')) return null;
  try {
    const root = await realpath(dir);
    const path = await realpath(join(root, decoded));
    if (!inside(root, path)) return null;
    const info = await stat(path);
    if (!info.isFile() || info.size > MAX_FOLDER_FILE_BYTES) return null;
    const bytes = await readFile(path);
    const body = new Uint8Array(new ArrayBuffer(bytes.byteLength));
    body.set(bytes);
    return { body, contentType: TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream' };
  } catch {
    return null;
  }
}
