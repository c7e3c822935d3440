/**
 * The ModelExports of the local API: the archive is made in this process before `start` resolves, so the
 * request that asked for it answers with the archive itself.
 */
import type { ModelExports } from '../../shared/ports/model-exports.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { ModelExportRequest } from '../../shared/schemas/index.ts';
import { exportFromStore, runModelExport, type ExportInto } from './model-export-job.ts';

export class InProcessModelExports implements ModelExports {
  constructor(
    private readonly store: ObjectStore,
    private readonly exportInto: ExportInto = exportFromStore(store),
  ) {}

  async start(request: ModelExportRequest): Promise<void> {
    await runModelExport(this.store, request, this.exportInto);
  }
}
