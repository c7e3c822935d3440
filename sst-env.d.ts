/* eslint-disable */
/**
 * Types for sst.config.ts. `sst install` (network) writes the full platform types to .sst/platform;
 * without it this file declares the part of SST v3's globals (`$config`, `$app`, `$interpolate`,
 * `$jsonStringify`, `sst.*`, `aws.*`) that sst.config.ts uses, so `tsc` checks the stack offline. It also
 * declares the linked resources the way `sst dev`/`sst deploy` generate them for `import { Resource } from 'sst'`.
 */
import 'sst';

declare module 'sst' {
  export interface Resource {
    Runs: { type: 'sst.aws.Bucket'; name: string };
    TrainerToken: { type: 'sst.sst.Secret'; value: string };
    ApiToken: { type: 'sst.sst.Secret'; value: string };
  }
}

declare global {
  /** A value known only at deploy time (a Pulumi Output). */
  interface SstOutput<T> {
    apply<U>(f: (value: T) => U): SstOutput<U>;
  }
  type SstInput<T> = T | SstOutput<T>;
  type SstArgs = { [key: string]: unknown };
  /** Pulumi's resource options, the part sst.config.ts uses. */
  type SstResourceOptions = { dependsOn?: unknown[]; ignoreChanges?: string[] };

  const $app: { name: string; stage: string };
  function $config<T extends { app(input?: { stage?: string }): object; run(): Promise<object | void> }>(config: T): T;
  function $interpolate(strings: TemplateStringsArray, ...values: unknown[]): SstOutput<string>;
  function $jsonStringify(value: unknown): SstOutput<string>;
  namespace $util {
    namespace asset {
      class FileAsset {
        constructor(path: string);
      }
    }
  }

  namespace sst {
    class Secret {
      constructor(name: string, placeholder?: string);
      readonly name: string;
      readonly value: SstOutput<string>;
    }
    namespace aws {
      class Bucket {
        constructor(name: string, args?: SstArgs);
        readonly name: SstOutput<string>;
        readonly arn: SstOutput<string>;
      }
      interface FunctionPermission {
        actions: string[];
        resources: SstInput<string>[];
        effect?: 'allow' | 'deny';
      }
      interface FunctionArgs {
        handler: string;
        runtime?: string;
        memory?: `${number} MB` | `${number} GB`;
        timeout?: `${number} seconds` | `${number} minutes`;
        concurrency?: { reserved?: number; provisioned?: number };
        /** /tmp's size. */
        storage?: `${number} MB` | `${number} GB`;
        nodejs?: { install?: string[]; esbuild?: { external?: string[] }; minify?: boolean; banner?: string };
        /** Files added to the function's package at `to` (default `from`), paths relative to sst.config.ts. */
        copyFiles?: Array<{ from: string; to?: string }>;
        url?: boolean | SstArgs;
        link?: unknown[];
        environment?: Record<string, SstInput<string>>;
        permissions?: FunctionPermission[];
      }
      class Function {
        constructor(name: string, args: FunctionArgs);
        readonly name: SstOutput<string>;
        readonly arn: SstOutput<string>;
        readonly url: SstOutput<string>;
      }
    }
  }

  namespace aws {
    function getCallerIdentityOutput(args?: SstArgs): { accountId: SstOutput<string> };
    function getPartitionOutput(args?: SstArgs): { partition: SstOutput<string> };
    namespace s3 {
      class BucketObjectv2 {
        constructor(name: string, args: SstArgs);
        readonly key: SstOutput<string>;
      }
      class BucketLifecycleConfigurationV2 {
        constructor(name: string, args: SstArgs);
      }
    }
    namespace lambda {
      class FunctionUrl {
        constructor(name: string, args: SstArgs);
        readonly functionUrl: SstOutput<string>;
      }
      class Permission {
        constructor(name: string, args: SstArgs);
      }
    }
    namespace ssm {
      class Parameter {
        constructor(name: string, args: SstArgs);
        readonly name: SstOutput<string>;
        readonly arn: SstOutput<string>;
        /** The value (a secret output for a SecureString). */
        readonly value: SstOutput<string>;
      }
    }
    namespace cloudwatch {
      class LogGroup {
        constructor(name: string, args: SstArgs);
        readonly name: SstOutput<string>;
        readonly arn: SstOutput<string>;
      }
      class MetricAlarm {
        constructor(name: string, args: SstArgs);
      }
      class LogMetricFilter {
        constructor(name: string, args: SstArgs);
      }
    }
    namespace sns {
      class Topic {
        constructor(name: string, args: SstArgs);
        readonly arn: SstOutput<string>;
      }
      class TopicSubscription {
        constructor(name: string, args: SstArgs);
      }
    }
    namespace iam {
      class Role {
        constructor(name: string, args: SstArgs);
        readonly id: SstOutput<string>;
        readonly name: SstOutput<string>;
        readonly arn: SstOutput<string>;
      }
      class RolePolicy {
        constructor(name: string, args: SstArgs);
      }
      class InstanceProfile {
        constructor(name: string, args: SstArgs);
        readonly name: SstOutput<string>;
      }
      class RolePolicyAttachment {
        constructor(name: string, args: SstArgs);
      }
    }
    namespace ec2 {
      class SecurityGroup {
        constructor(name: string, args: SstArgs);
        readonly id: SstOutput<string>;
      }
      class Instance {
        constructor(name: string, args: SstArgs, opts?: SstResourceOptions);
        readonly id: SstOutput<string>;
        readonly arn: SstOutput<string>;
        readonly publicIp: SstOutput<string>;
      }
      class Eip {
        constructor(name: string, args: SstArgs);
        readonly id: SstOutput<string>;
        readonly publicIp: SstOutput<string>;
        readonly allocationId: SstOutput<string>;
      }
      class EipAssociation {
        constructor(name: string, args: SstArgs);
      }
      function getAmiOutput(args: SstArgs): { id: SstOutput<string> };
    }
  }
}
