/* brigade info: backends compiled in, devices visible, library versions. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: brigade info [--help]\n"
            "\n"
            "Show the backends compiled into this build, the CPU cores and NUMA nodes\n"
            "(from hwloc), the GPUs visible now with their PCI address, NUMA node,\n"
            "nearest CPUs and peer access, and the versions of the libraries found.\n");
}

int brg_cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int c;
    optind = 1;
    opterr = 0; /* brg_cli_bad_option says what was wrong, headed as every other message */
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return BRG_EXIT_OK;
        }
        return brg_cli_bad_option("info", c, argv);
    }
    if (optind < argc) {
        fprintf(stderr, "brigade info: unexpected argument '%s'\n", argv[optind]);
        return BRG_EXIT_USAGE;
    }

    brg_system_info info;
    brg_status st = brg_system_info_get(&info);
    if (st != BRG_OK) return brg_cli_fail("info", st);
    size_t conv_workspace = 0; /* refused here as every device list refuses it */
    st = brg_cuda_conv_workspace(&conv_workspace);
    if (st != BRG_OK) return brg_cli_fail("info", st);

    char b[32], budget[32];
    printf("brigade %s\n\n", info.version);
    printf("Backends\n");
    printf("  cpu    yes (convolutions: %s, BRG_CPU_CONV=onednn|im2col chooses; activations between layers: %s, "
           "BRG_CPU_LAYOUT=blocked|plain chooses)\n",
           strcmp(info.cpu_convolution, "onednn") == 0 ? "oneDNN" : "im2col + OpenBLAS", brg_cpu_layout());
    printf("  cuda   %s", info.cuda_compiled ? "compiled in" : "no");
    if (info.cuda_compiled)
        printf(" (cuBLAS yes, cuDNN %s, NCCL %s)", info.cudnn_compiled ? "yes" : "no",
               info.nccl_compiled ? "yes" : "no");
    if (info.cuda_compiled)
        printf("; CUDA devices %s", brg_backend_available(BRG_BACKEND_CUDA) ? "available"
                                    : info.cudnn_compiled ? "unavailable: no GPU visible"
                                                          : "unavailable: built without cuDNN");
    if (info.cudnn_compiled) {
        /* What CUDA devices made now take from the environment (docs/cuda.md). */
        printf("\n         devices made now: TF32 %s (BRG_CUDA_TF32=1 allows); convolutions by cuDNN's %s "
               "(BRG_CUDA_CONV_ALGO=measure times them) on its %s API (BRG_CUDA_CONV_API=graph|legacy), each with at "
               "most %s of workspace (BRG_CUDA_CONV_WORKSPACE), %s (BRG_CUDA_CONV_WORKSPACE_GROW=1 widens it under "
               "the peak); 1x1 gradients by %s (BRG_CUDA_CONV_1X1=gemm: cuBLAS)",
               brg_cuda_tf32_enabled() ? "allowed" : "off",
               strcmp(brg_cuda_conv_algo(), "measure") == 0 ? "timings" : "heuristics", brg_cuda_conv_api(),
               brg_format_bytes(conv_workspace, budget, sizeof budget),
               brg_cuda_conv_workspace_grows() ? "widened" : "not widened",
               strcmp(brg_cuda_conv_1x1(), "gemm") == 0 ? "cuBLAS GEMM" : "cuDNN");
    }
    printf("\n\nCPU\n");
    printf("  %s\n", info.cpu_model);
    printf("  %d package%s, %d cores, %d hardware threads, %s memory in hwloc's NUMA nodes\n", info.packages,
           info.packages == 1 ? "" : "s", info.cores, info.pus, brg_format_bytes(info.host_memory, b, sizeof b));
    if (info.memory_total) { /* hwloc's count above may be only part of it */
        char t[32], a[32], l[32], limit[48] = "no cgroup limit";
        if (info.cgroup_limit)
            snprintf(limit, sizeof limit, "cgroup limit %s", brg_format_bytes(info.cgroup_limit, l, sizeof l));
        printf("  memory this process can use: %s (%s total, %s available, %s)\n",
               brg_format_bytes(info.memory_usable, b, sizeof b), brg_format_bytes(info.memory_total, t, sizeof t),
               brg_format_bytes(info.memory_available, a, sizeof a), limit);
    }
    for (int i = 0; i < info.numa_count && i < BRG_INFO_MAX_NUMA; i++)
        printf("  NUMA node %d: %d cores (CPUs %s), %s\n", info.numa[i].os_index, info.numa[i].cores,
               info.numa[i].cpuset,
               info.numa[i].memory ? brg_format_bytes(info.numa[i].memory, b, sizeof b) : "memory unknown");

    printf("\nGPUs\n");
    if (info.gpu_count == 0) printf("  %s\n", info.gpu_note);
    for (int i = 0; i < info.gpu_count; i++) {
        const brg_gpu_info *g = &info.gpus[i];
        /* The memory in whole MiB too: the card to name where another
         * machine plans for this one (cuda:0-6@81079MiB). */
        printf("  cuda:%d  %s, %s (%zu MiB), compute %d.%d, %d SMs\n", g->index, g->name,
               brg_format_bytes(g->total_memory, b, sizeof b), (size_t)(g->total_memory >> 20), g->compute_major,
               g->compute_minor, g->multiprocessors);
        char numa[32] = "NUMA node unknown";
        if (g->numa_node >= 0) snprintf(numa, sizeof numa, "NUMA node %d", g->numa_node);
        printf("          PCI %s, %s, nearest CPUs %s\n", g->pci_bus_id[0] ? g->pci_bus_id : "unknown", numa,
               g->cpus[0] ? g->cpus : "unknown");
        /* What the whole GPU gives a device, and the card that plans it on
         * a machine without it (whole MiB, at most the card's memory). */
        const size_t reserve = brg_cuda_reserve_bytes(g->total_memory);
        if (g->total_memory > reserve) {
            char a[32], r[32];
            printf("          whole: a %s arena (%s kept for the CUDA context and libraries); elsewhere, plan it as "
                   "cuda:%d@%zuMiB\n", brg_format_bytes(g->total_memory - reserve, a, sizeof a),
                   brg_format_bytes(reserve, r, sizeof r), g->index, g->total_memory >> 20);
        }
    }
    int alike = info.gpu_count > 1;
    for (int i = 1; i < info.gpu_count; i++)
        alike &= info.gpus[i].total_memory >> 20 == info.gpus[0].total_memory >> 20;
    if (alike)
        printf("  this node's GPUs, planned elsewhere: --devices cuda:0-%d@%zuMiB\n", info.gpu_count - 1,
               info.gpus[0].total_memory >> 20);
    if (info.gpu_count > 1) {
        printf("  peer access (row reads column's memory directly):\n        ");
        for (int j = 0; j < info.gpu_count; j++) printf(" cuda:%-2d", info.gpus[j].index);
        printf("\n");
        for (int i = 0; i < info.gpu_count; i++) {
            printf("  cuda:%-2d", info.gpus[i].index);
            for (int j = 0; j < info.gpu_count; j++)
                printf(" %-7s", i == j ? "-" : info.peer_access[i][j] ? "yes" : "no");
            printf("\n");
        }
    }

    printf("\nLibraries\n");
    for (int i = 0; i < info.lib_count; i++) printf("  %-13s %s\n", info.libs[i].name, info.libs[i].version);
    return BRG_EXIT_OK;
}
