// An app's use of pt2web, touching its whole public API under `tsc --strict`: run
// tests/fixtures/mlp_train.pt2 and compare with PyTorch's outputs and weights (mlp_train.io /
// .state.safetensors). The page (main.ts) and the Worker (worker.ts) both call `example`.
import {
  load, tensor, init, cpuThreading, wasmMemoryBytes, isPt2Package, programNames, gpu, clearCache,
  backends, openArchive, listPrograms, Pt2WebError, GpuTensor, Archive,
  type BackendSwitches, type ModuleCallEntry,
  type Model, type LoadOptions, type LoadProgress, type ModelInfo, type PrepareStats, type Profile, type RunStats,
  type Tensor, type GpuProperties, type GpuMemoryStats, type GenerateOptions,
} from 'pt2web';
import { fetchBytes, maxDiff, parseSafetensors } from './fixture';

export interface ExampleResult {
  device: 'webgpu' | 'cpu';
  /** Largest difference of the output from PyTorch's, and of a weight read back from the state. */
  outputDiff: number;
  stateDiff: number;
  outputShape: number[];
  programs: string[];
  listed: string[];
  extraFiles: string[];
  moduleCalls: string[];
  backendsBuilt: string[];
  phases: string[];
  isPt2: boolean;
  notPt2: boolean;
  inputError: string;
  planSteps: number;
  profiled: number;
  firstRunPipelines: number | null;
  gpuTensorDiff: number | null;
  adapter: string | null;
  threads: number;
  wasmBytes: number;
}

export async function example(device: 'webgpu' | 'cpu', base = ''): Promise<ExampleResult> {
  await init({ threads: 'auto' });
  const archive = await fetchBytes(`${base}/fixtures/mlp_train.pt2`);
  const io = parseSafetensors(await fetchBytes(`${base}/fixtures/mlp_train.io.safetensors`));
  const weights = parseSafetensors(await fetchBytes(`${base}/fixtures/mlp_train.state.safetensors`));

  // From its URL, through the archive cache; the phases onProgress reports, in order.
  await clearCache();
  const phases: LoadProgress['phase'][] = [];
  const options: LoadOptions = {
    device, prepare: true, cache: 'auto',
    onProgress: (_loaded, _total, p) => { if (phases.at(-1) !== p.phase) phases.push(p.phase); },
  };
  const model: Model = await load(`${base}/fixtures/mlp_train.pt2`, options);
  const info: ModelInfo = model.info;
  const prepared: PrepareStats | undefined = model.prepareStats;

  const x: Tensor = io.input_0;
  const y = (await model.run([tensor(x.data, x.shape, 'float32')])) as Tensor; // one output
  const stats: RunStats | null = model.lastRunStats();

  let gpuTensorDiff: number | null = null;
  let adapter: string | null = null;
  if (model.device === 'webgpu') {
    const adapters: number = await gpu.deviceCount();
    if (adapters !== 1) throw new Error(`gpu.deviceCount() = ${adapters}`);
    const onGpu = (await model.run({ x }, { keepOnGpu: true })) as GpuTensor;
    gpuTensorDiff = maxDiff(await onGpu.read(), io.output_0);
    onGpu.dispose();
    const props: GpuProperties = await gpu.properties();
    const mem: GpuMemoryStats | null = gpu.memoryStats();
    adapter = `${props.name} (${props.backend}), ${mem?.allocated ?? 0} bytes allocated`;
    await gpu.synchronize();
  }

  model.manualSeed(0);
  model.startProfiler();
  await model.run([x], { timeoutMs: 60_000 });
  const profile: Profile | null = model.stopProfiler();

  let inputError = '';
  try {
    await model.run([tensor(new Float32Array(3), [3])]);
  } catch (e) {
    if (e instanceof Pt2WebError) inputError = e.code;
  }
  const weight = await model.state.get('fc1.weight');
  // Setting a weight to what it holds changes nothing.
  model.state.set('fc1.weight', weight);
  const calls: ModuleCallEntry[] = info.moduleCallGraph;
  const opened: Archive = await openArchive(archive);
  const switches: BackendSwitches & { built: string[] } = await backends.get();
  await backends.set({ deterministic: switches.deterministic });
  // Only the type: mlp_train is no language model (generate is exercised in tests/js).
  const generateOptions: GenerateOptions = { maxNewTokens: 4, temperature: 0 };
  void generateOptions;

  const result: ExampleResult = {
    device: model.device,
    outputDiff: maxDiff(y, io.output_0),
    stateDiff: maxDiff(weight, weights['fc1.weight']),
    outputShape: y.shape,
    programs: await programNames(archive),
    listed: await listPrograms(opened),
    extraFiles: Object.keys(opened.extraFiles()),
    moduleCalls: calls.map((c) => c.fqn),
    backendsBuilt: switches.built,
    phases,
    isPt2: await isPt2Package(archive),
    notPt2: await isPt2Package(new Uint8Array(8)),
    inputError,
    planSteps: prepared?.planSteps ?? 0,
    profiled: profile?.events.length ?? 0,
    firstRunPipelines: stats ? stats.pipelinesCreated : null,
    gpuTensorDiff,
    adapter,
    threads: cpuThreading().threads,
    wasmBytes: wasmMemoryBytes(),
  };
  if (info.inputs[0].name !== 'x') throw new Error(`inputs: ${JSON.stringify(info.inputs)}`);
  model.dispose();
  return result;
}
