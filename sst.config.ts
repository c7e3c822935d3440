/// <reference path="./sst-env.d.ts" />
// Placeholder until the cloud issue fills in the bucket, functions, API and GPU trainer box.
export default $config({
  app() {
    return { name: 'esopt', home: 'aws' };
  },
  async run() {
    return {};
  },
});
