"""gpu_library: HIP sources compiled for the flavour chosen by --config.

  --config=cuda (default): nvcc through HIP's NVIDIA headers, sm_90.
  --config=rocm:           Debian's clang-15 in HIP mode, gfx90a and gfx940.
  --config=host:           no GPU compiler (./bazelw's choice without nvcc):
                           every gpu_library is incompatible, so it and all
                           that depend on it are skipped by `build //...` and
                           `test //...`, unless it has host_srcs, a host-only
                           implementation of its hdrs, which it builds instead.

Each source becomes one position-independent object; the objects are wrapped
in a cc_library so that cc_binary and cc_test depend on them as usual. This is
the only place that knows compiler paths and GPU architectures. There is no
relocatable device code: kernels are single-source and header-only below.
"""

load("//bazel:copts.bzl", "QR_COPTS")

# target_compatible_with values: GPU_ONLY skips a target in the host-only
# flavour (for targets that need no gpu_library, which are skipped already);
# HOST_ONLY skips it in the GPU flavours (tests of the host-only build).
GPU_ONLY = select({
    "//bazel:host_only": ["//bazel:incompatible"],
    "//conditions:default": [],
})
HOST_ONLY = select({
    "//bazel:host_only": [],
    "//conditions:default": ["//bazel:incompatible"],
})

_NVCC = "/usr/local/cuda/bin/nvcc"
_HIP_CLANG = "/usr/bin/clang++-15"
_NVIDIA_ARCHS = ["90"]
_AMD_ARCHS = ["gfx90a", "gfx940"]

def _gpu_object_impl(ctx):
    cc = cc_common.merge_cc_infos(
        cc_infos = [d[CcInfo] for d in ctx.attr.deps],
    ).compilation_context
    args = []
    for p in cc.quote_includes.to_list() + cc.includes.to_list():
        args += ["-I", p]
    for p in cc.system_includes.to_list():
        args += ["-isystem", p]
    args += ["-D" + d for d in cc.defines.to_list()]
    if ctx.attr.platform == "nvidia":
        exe = _NVCC
        flags = [
            "-x",
            "cu",
            "-Xcompiler",
            "-fPIC,-Wall,-Wextra",
            "-Werror=all-warnings",
            # hip_bfloat16.h: "__device__ annotation is ignored on a function
            # that is explicitly defaulted".
            "-diag-suppress=20012",
            "--expt-relaxed-constexpr",
        ]
        flags += ["-gencode=arch=compute_%s,code=sm_%s" % (a, a) for a in _NVIDIA_ARCHS]
        mnemonic = "NvccCompile"
    else:
        exe = _HIP_CLANG
        flags = [
            "-x",
            "hip",
            "-fPIC",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wno-unused-result",
            # hip-clang contracts a*b+c into FMA by default, even through HIP's
            # __fmul_rn/__fadd_rn; bit-exactness with the host reference needs
            # every operation rounded on its own.
            "-ffp-contract=off",
            "--rocm-path=/usr",
            "--hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
        ]
        flags += ["--offload-arch=" + a for a in _AMD_ARCHS]
        mnemonic = "HipClangCompile"
    inputs = depset(ctx.files.hdrs, transitive = [cc.headers])
    outs = []
    for src in ctx.files.srcs:
        out = ctx.actions.declare_file("_gpu_objs/%s/%s.pic.o" % (ctx.label.name, src.basename.rsplit(".", 1)[0]))
        # nvcc names its temporaries after its pid; sandboxed actions each
        # run in a pid namespace (nvcc is pid 2 in every one), so concurrent
        # compiles sharing /tmp overwrite each other's files. A private
        # TMPDIR per action avoids that.
        ctx.actions.run_shell(
            command = 'd=$(mktemp -d) && TMPDIR="$d" "$@"; rc=$?; rm -rf "$d"; exit $rc',
            arguments = [exe] + flags + ["-std=c++17", "-O3", "-I", "."] + ctx.attr.copts + args +
                        ["-c", src.path, "-o", out.path],
            inputs = depset([src], transitive = [inputs]),
            outputs = [out],
            mnemonic = mnemonic,
            progress_message = "GPU-compiling %s (%s)" % (src.short_path, ctx.attr.platform),
            use_default_shell_env = True,  # nvcc runs gcc from PATH
        )
        outs.append(out)
    return [DefaultInfo(files = depset(outs))]

_gpu_object = rule(
    implementation = _gpu_object_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(providers = [CcInfo]),
        "platform": attr.string(values = ["nvidia", "amd"]),
        "copts": attr.string_list(),
    },
)

def gpu_library(name, srcs, hdrs = [], deps = [], copts = [], host_srcs = None, **kwargs):
    """A cc_library whose srcs are .cu files compiled for the chosen GPU flavour.

    hdrs are host-facing headers (no HIP includes); device-only helpers go in
    deps (header-only cc_libraries, .cuh). host_srcs (g++ sources, no HIP)
    implement hdrs in the host-only flavour; without them the library is
    skipped there. kwargs go to the cc_library.
    """
    all_deps = deps + ["//bazel/hip"]
    _gpu_object(
        name = name + "_objs",
        srcs = srcs,
        hdrs = hdrs,
        deps = all_deps,
        copts = copts,
        platform = select({
            "//bazel:rocm": "amd",
            "//conditions:default": "nvidia",
        }),
        target_compatible_with = GPU_ONLY,
        visibility = ["//visibility:private"],
        tags = kwargs.get("tags", []),
    )
    if host_srcs == None:
        lib_srcs = [":" + name + "_objs"]
        lib_deps = all_deps
        kwargs["target_compatible_with"] = GPU_ONLY
    else:
        lib_srcs = select({
            "//bazel:host_only": host_srcs,
            "//conditions:default": [":" + name + "_objs"],
        })
        lib_deps = deps + select({
            "//bazel:host_only": [],
            "//conditions:default": ["//bazel/hip"],
        })
        kwargs["copts"] = select({
            "//bazel:host_only": QR_COPTS,
            "//conditions:default": [],
        })
    native.cc_library(
        name = name,
        srcs = lib_srcs,
        hdrs = hdrs,
        deps = lib_deps,
        # Static cudart must resolve the objects' runtime calls in the final
        # link, which a per-library .so would not see.
        linkstatic = True,
        **kwargs
    )
