#!/usr/bin/env python3
"""Make Debian's HIP 5.2.3 nvidia_detail/nvidia_hip_runtime_api.h compile with CUDA 12/13.
usage: patch_hip_nvidia_cuda13.py OUT_DIR   -> writes OUT_DIR/hip/nvidia_detail/nvidia_hip_runtime_api.h
Put -IOUT_DIR before the system include path; every other hip/ header still comes from /usr/include."""
import os, re, sys
SRC = "/usr/include/hip/nvidia_detail/nvidia_hip_runtime_api.h"
s = open(SRC).read()
NEW = "CUDART_VERSION >= 12000"   # CUDA 12 removed texture refs etc.; 13 changed signatures

def sub(old, new, count=1):
    global s
    n = s.count(old)
    if n != count: sys.exit(f"patch: expected {count}x, found {n}x: {old[:70]!r}")
    s = s.replace(old, new)

def guard(pattern, cond="CUDART_VERSION < 12000", expect=None):
    """Wrap every function definition matching pattern (up to the next '\n}\n') in #if cond."""
    global s
    rx = re.compile(pattern + r".*?\n}\n", re.S)
    n = len(rx.findall(s))
    if expect is not None and n != expect: sys.exit(f"patch: {pattern!r}: {n} != {expect}")
    s = rx.sub(lambda m: f"#if {cond}\n{m.group(0)}#endif\n", s)

# 1. cudaMemAdvise / cudaMemPrefetchAsync take cudaMemLocation in CUDA 13.
sub("""    return hipCUDAErrorTohipError(cudaMemAdvise(dev_ptr, count,
        hipMemoryAdviseTocudaMemoryAdvise(advice), device));""",
"""#if CUDART_VERSION >= 13000
    struct cudaMemLocation loc_;
    loc_.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc_.id = device;
    return hipCUDAErrorTohipError(cudaMemAdvise(dev_ptr, count,
        hipMemoryAdviseTocudaMemoryAdvise(advice), loc_));
#else
    return hipCUDAErrorTohipError(cudaMemAdvise(dev_ptr, count,
        hipMemoryAdviseTocudaMemoryAdvise(advice), device));
#endif""")
sub("""    return hipCUDAErrorTohipError(cudaMemPrefetchAsync(dev_ptr, count, device, stream));""",
"""#if CUDART_VERSION >= 13000
    struct cudaMemLocation loc_;
    loc_.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc_.id = device;
    return hipCUDAErrorTohipError(cudaMemPrefetchAsync(dev_ptr, count, loc_, 0, stream));
#else
    return hipCUDAErrorTohipError(cudaMemPrefetchAsync(dev_ptr, count, device, stream));
#endif""")

# 2. cudaDeviceProp fields removed in CUDA 13 -> query attributes instead.
for f in ("clockRate", "computeMode", "memoryClockRate"):
    sub(f"    cdprop.{f} = prop->{f};\n", "")          # hipChooseDevice: just don't match on them
attr = {"clockRate": "cudaDevAttrClockRate", "memoryClockRate": "cudaDevAttrMemoryClockRate",
        "computeMode": "cudaDevAttrComputeMode"}
for f, a in attr.items():
    sub(f"    p_prop->{f} = cdprop.{f};\n", f"    cudaDeviceGetAttribute(&p_prop->{f}, {a}, device);\n")
sub("p_prop->clockInstructionRate = cdprop.clockRate;", "p_prop->clockInstructionRate = p_prop->clockRate;")
sub("    p_prop->cooperativeMultiDeviceLaunch = cdprop.cooperativeMultiDeviceLaunch;\n",
    "    p_prop->cooperativeMultiDeviceLaunch = 0;\n")
sub("    p_prop->kernelExecTimeoutEnabled = cdprop.kernelExecTimeoutEnabled;\n",
    "    cudaDeviceGetAttribute(&p_prop->kernelExecTimeoutEnabled, cudaDevAttrKernelExecTimeout, device);\n")
sub("            cdattr = cudaDevAttrCooperativeMultiDeviceLaunch;\n            break;\n",
    "            *pi = 0;\n            return hipSuccess;\n")

# 3. cuCtxCreate is cuCtxCreate_v4(ctx, CUctxCreateParams*, flags, dev) in CUDA 13.
sub("cuCtxCreate(ctx, flags, device)", "cuCtxCreate(ctx, NULL, flags, device)")

# 4. Texture references, texture<> and multi-device cooperative launch are gone (CUDA 12).
guard(r"template <class T, int dim, enum cudaTextureReadMode readMode>\n", expect=7)
guard(r"__HIP_DEPRECATED inline static hipError_t hipBindTexture\(", expect=1)
guard(r"__HIP_DEPRECATED inline static hipError_t hipBindTexture2D\(", expect=1)
guard(r"__HIP_DEPRECATED inline static hipError_t hipGetTextureAlignmentOffset\(", expect=1)
guard(r"inline static hipError_t hipLaunchCooperativeKernelMultiDevice\(", expect=1)

# 5. Graph edge data argument (CUDA 12.3+, mandatory in 13): pass NULL.
sub("cudaGraphAddDependencies(graph, from, to, numDependencies)",
    "cudaGraphAddDependencies(graph, from, to, NULL, numDependencies)")
sub("cudaGraphRemoveDependencies(graph, from, to, numDependencies)",
    "cudaGraphRemoveDependencies(graph, from, to, NULL, numDependencies)")
sub("cudaGraphGetEdges(graph, from, to, numEdges)", "cudaGraphGetEdges(graph, from, to, NULL, numEdges)")
sub("cudaGraphNodeGetDependencies(node, pDependencies, pNumDependencies)",
    "cudaGraphNodeGetDependencies(node, pDependencies, NULL, pNumDependencies)")
sub("cudaGraphNodeGetDependentNodes(node, pDependentNodes, pNumDependentNodes)",
    "cudaGraphNodeGetDependentNodes(node, pDependentNodes, NULL, pNumDependentNodes)")
sub("""cudaStreamGetCaptureInfo_v2(
        stream, captureStatus_out, id_out, graph_out, dependencies_out, numDependencies_out)""",
    """cudaStreamGetCaptureInfo(
        stream, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out)""")
sub("""cudaStreamUpdateCaptureDependencies(stream, dependencies,
                                                                      numDependencies, flags)""",
    """cudaStreamUpdateCaptureDependencies(stream, dependencies, NULL,
                                                                      numDependencies, flags)""")

out = os.path.join(sys.argv[1], "hip/nvidia_detail")
os.makedirs(out, exist_ok=True)
open(os.path.join(out, "nvidia_hip_runtime_api.h"), "w").write(
    "// GENERATED by patch_hip_nvidia_cuda13.py from Debian libamdhip64-dev 5.2.3 (MIT) for CUDA 13.\n" + s)
