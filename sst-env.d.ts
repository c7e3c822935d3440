// The SST globals sst.config.ts uses. `sst install` needs the network (it downloads pulumi), so the
// few we use are declared here; the config test evaluates sst.config.ts against recorded stand-ins.
declare function $config(input: {
  app(input: { stage: string }): { name: string; home: 'aws'; removal?: 'retain' | 'remove'; providers?: Record<string, unknown> };
  run(): Promise<Record<string, unknown>>;
}): unknown;
