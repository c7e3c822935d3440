/**
 * The slice of the WebAssembly JavaScript API the noise kernel uses. The project compiles against
 * lib ES2023 without DOM, which declares no `WebAssembly` value, so it is typed here once.
 */
export interface WebAssemblyApi {
  validate(bytes: Uint8Array<ArrayBuffer>): boolean;
  Module: new (bytes: Uint8Array<ArrayBuffer>) => object;
  Instance: new (module: object, imports?: Record<string, Record<string, unknown>>) => { exports: object };
}

/** The engine's WebAssembly object, or undefined where there is none. */
export const webAssembly: WebAssemblyApi | undefined = (globalThis as { WebAssembly?: WebAssemblyApi }).WebAssembly;
