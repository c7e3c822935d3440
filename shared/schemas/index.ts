export * from './ids.ts';
export * from './run-config.ts';
export * from './manifest.ts';
export * from './episode.ts';
export * from './checkpoint.ts';
export * from './metrics.ts';
export * from './api.ts';
export * from './work-queue.ts';
