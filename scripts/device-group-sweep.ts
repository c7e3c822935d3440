/**
 * Full mode's device member switch (serving/full-device.ts) at several `deviceGroupElements`, one engine at
 * a time on webgpu: each size's median switch time (weights made, waited for by a 4-byte read-back), its
 * graph runs and graph nodes a switch. Prints JSON. Usage: npx tsx scripts/device-group-sweep.ts MODEL
 * REPEATS SIZE… (e.g. small 3 1 262144 1048576 4194304 16777216).
 */
import * as ort from 'onnxruntime-node';
import { ask } from '../shared/es.ts';
import { modelSpecFlag } from '../trainer/engine/model/presets.ts';
import { openEngineOn } from '../trainer/assembly/engine.ts';
import { openModel } from '../trainer/engine/model/open-model.ts';
import { GraphBuilder } from '../trainer/engine/onnx/graph-builder.ts';
import { DataType, encodeModel } from '../trainer/engine/onnx/proto.ts';
import { median, timeMs } from '../trainer/studies/bench/measure.ts';

const [name, repeatsArg, ...sizes] = process.argv.slice(2);
if (!name || !repeatsArg || sizes.length === 0) throw new Error('usage: device-group-sweep.ts MODEL REPEATS SIZE…');
const g = new GraphBuilder();
g.input('x', DataType.FLOAT, ['n']);
g.nameOutput(g.op1('ReduceSum', ['x'], { keepdims: 0 }), 'sum');
g.output('sum', DataType.FLOAT, []);
const sync = await ort.InferenceSession.create(encodeModel(g.model('sync')), { executionProviders: ['webgpu'] });
const members = ask({ population: 4, antithetic: true });
const rows = [];
for (const size of sizes.map(Number)) {
  const spec = modelSpecFlag(name, 0);
  const engine = await openEngineOn(openModel(spec), { model: spec, executionProvider: 'webgpu', mode: 'full', noise: 'esopt-device-noise', prefixCacheBytes: 0, deviceGroupElements: size });
  try {
    engine.setPopulation({ runSeed: 1, iteration: 0, sigma: 0.01, rank: 1, noise: 'esopt-device-noise', members });
    const once = (m: number) => engine.deviceMembers!.withMember(members[m % 4], async (feeds) => {
      await sync.run({ x: Object.values(feeds).reduce((a, t) => (t.dims[0] < a.dims[0] ? t : a)) });
    });
    await once(0);
    const ms: number[] = [];
    for (let r = 0; r < Number(repeatsArg); r++) ms.push(await timeMs(() => once(r + 1)));
    const t = engine.switchTransfer!;
    rows.push({ device_group_elements: size, switch_ms: median(ms), graph_runs_per_switch: t.noiseRuns / t.switches, graph_nodes_per_switch: t.noiseNodes / t.switches });
    process.stderr.write(`${JSON.stringify(rows.at(-1))}\n`);
  } finally {
    await engine.close();
  }
}
await sync.release();
console.log(JSON.stringify({ model: name, repeats: Number(repeatsArg), rows }, null, 2));
