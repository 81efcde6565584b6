"""GPU spec table (data) and the lookup from NVML / nvidia-smi names to a row.

One source of truth for vendor peak figures. Every row names its source: the section of
``shared/reference/gpu-performance.md`` it was taken from and the datasheet that section cites.

Conventions
-----------
* TFLOPS figures are **dense** (no 2:4 sparsity), per gpu-performance.md section 1.1 rule 1.
* ``bf16_tflops`` / ``fp16_tflops`` are tensor-core rates *with FP32 accumulate* (what PyTorch
  GEMMs use). GeForce cards run that at half the FP16-accumulate rate (section 1.1 rule 2); the
  FP16-accumulate figure is kept in ``fp16_acc16_tflops`` where the reference gives it.
* ``None`` means the reference gives no trustworthy figure: the gate must measure, not guess.
* ``memory_gib`` is the nominal datasheet capacity ("80 GB"); NVML reports slightly less
  (e.g. 81559 MiB for an H100 80GB). ``nvlink_gbs`` is bidirectional per GPU, as the datasheets
  quote it; ``None`` means no NVLink.
* ``gpu_class``: ``datacenter-hbm`` (data-center part with HBM, any form factor),
  ``datacenter-pcie`` (data-center PCIe card with GDDR), ``geforce``, ``workstation``.
* ``confidence`` is the reference's mark: V checked in a primary source, S secondary, U unverified.
* ``l2_mb`` is the L2 cache in MB as NVIDIA writes it (binary: an H100's "50 MB" is 52,428,800 bytes, CUDA's
  ``l2CacheSize``), with its own source in ``l2_source``: the gate's bandwidth buffers must be far past it, or
  they read the cache (an RTX 4090 "3.87 TB/s" of its 1.008, section 2.2). ``None``: no source at hand gives it.
"""

import re

from ..system.tablerow import table_row

REFERENCE = "shared/reference/gpu-performance.md"

_FIELDS = (
    "key", "name", "arch", "compute_capability", "form_factor", "memory_gib", "memory_type",
    "memory_bandwidth_gbs", "fp64_tflops", "fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops",
    "fp16_acc16_tflops", "pcie_gen", "pcie_width", "nvlink_gbs", "power_w", "gpu_class", "confidence",
    "source", "notes", "match", "l2_mb", "l2_source",
)


def _row(**kw):
    return table_row(_FIELDS, "spec", kw)


_S12 = REFERENCE + " section 1.2"

# Sources of the L2 sizes: NVIDIA's architecture whitepapers (the GPU's table or its chip's), product pages.
_L2_VOLTA = ("https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-whitepaper.pdf "
             "(Tesla V100: 6144 KB L2)")
_L2_TURING = ("https://images.nvidia.com/aem-dam/en-zz/Solutions/design-visualization/technologies/"
              "turing-architecture/NVIDIA-Turing-Architecture-Whitepaper.pdf (Tesla T4, a TU104: 4096 KB L2)")
_L2_GA102 = ("https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf "
             "(GA102, 384-bit: 6144 KB L2)")
_L2_GA100 = ("https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf "
             "(A100: 40 MB L2, 40 and 80 GB parts alike)")
_L2_HOPPER = ("https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper (H100 SXM5 and H100 PCIe: "
              "50 MB L2)")
_L2_ADA = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"

# Rows: order matters only for readability. ``match`` are regular expressions that must
# fullmatch the normalised name (lower case, single spaces, leading "nvidia " removed).
SPECS = [
    # ---- Volta ---------------------------------------------------------------------------
    _row(key="v100-sxm2-16gb", name="Tesla V100 SXM2 16GB", arch="Volta", compute_capability="7.0",
         form_factor="SXM", memory_gib=16, memory_type="HBM2", memory_bandwidth_gbs=900,
         fp64_tflops=7.8, fp32_tflops=15.7, tf32_tflops=None, fp16_tflops=125, bf16_tflops=None,
         pcie_gen=3, pcie_width=16, nvlink_gbs=300, power_w=300, gpu_class="datacenter-hbm", confidence="V",
         source=_S12 + " (V100 SXM2 row); NVIDIA Tesla V100 datasheet as cited by Lightning; NVLink per stas00",
         notes="no TF32, no BF16 in hardware", match=[r"tesla v100-sxm2(?:-\d+gb)?"],
         l2_mb=6, l2_source=_L2_VOLTA),
    _row(key="v100-sxm2-32gb", name="Tesla V100 SXM2 32GB", arch="Volta", compute_capability="7.0",
         form_factor="SXM", memory_gib=32, memory_type="HBM2", memory_bandwidth_gbs=900,
         fp64_tflops=7.8, fp32_tflops=15.7, tf32_tflops=None, fp16_tflops=125, bf16_tflops=None,
         pcie_gen=3, pcie_width=16, nvlink_gbs=300, power_w=300, gpu_class="datacenter-hbm", confidence="V",
         source=_S12 + " (V100 SXM2 row); NVIDIA Tesla V100 datasheet as cited by Lightning; NVLink per stas00",
         notes="no TF32, no BF16 in hardware", match=[r"tesla v100-sxm2(?:-\d+gb)?"],
         l2_mb=6, l2_source=_L2_VOLTA),
    _row(key="v100-pcie-16gb", name="Tesla V100 PCIe 16GB", arch="Volta", compute_capability="7.0",
         form_factor="PCIe", memory_gib=16, memory_type="HBM2", memory_bandwidth_gbs=900,
         fp64_tflops=7.0, fp32_tflops=14.0, tf32_tflops=None, fp16_tflops=112, bf16_tflops=None,
         pcie_gen=3, pcie_width=16, nvlink_gbs=None, power_w=250, gpu_class="datacenter-hbm", confidence="V",
         source=_S12 + " (V100 PCIe row); NVIDIA Tesla V100 datasheet as cited by Lightning",
         notes="no TF32, no BF16 in hardware", match=[r"tesla v100-pcie(?:-\d+gb)?"],
         l2_mb=6, l2_source=_L2_VOLTA),
    _row(key="v100-pcie-32gb", name="Tesla V100 PCIe 32GB", arch="Volta", compute_capability="7.0",
         form_factor="PCIe", memory_gib=32, memory_type="HBM2", memory_bandwidth_gbs=900,
         fp64_tflops=7.0, fp32_tflops=14.0, tf32_tflops=None, fp16_tflops=112, bf16_tflops=None,
         pcie_gen=3, pcie_width=16, nvlink_gbs=None, power_w=250, gpu_class="datacenter-hbm", confidence="V",
         source=_S12 + " (V100 PCIe row); NVIDIA Tesla V100 datasheet as cited by Lightning",
         notes="no TF32, no BF16 in hardware", match=[r"tesla v100-pcie(?:-\d+gb)?"],
         l2_mb=6, l2_source=_L2_VOLTA),
    # ---- Turing --------------------------------------------------------------------------
    _row(key="t4", name="Tesla T4", arch="Turing", compute_capability="7.5", form_factor="PCIe",
         memory_gib=16, memory_type="GDDR6", memory_bandwidth_gbs=320, fp64_tflops=None, fp32_tflops=8.1,
         tf32_tflops=None, fp16_tflops=65, bf16_tflops=None, pcie_gen=3, pcie_width=16, nvlink_gbs=None,
         power_w=70, gpu_class="datacenter-pcie", confidence="V",
         source=_S12 + " (T4 row); NVIDIA T4 datasheet as cited by Lightning (bandwidth S)",
         notes="no BF16 in hardware (emulated ~2 TFLOPS)", match=[r"tesla t4", r"t4"],
         l2_mb=4, l2_source=_L2_TURING),
    # ---- Ampere --------------------------------------------------------------------------
    _row(key="a10", name="NVIDIA A10", arch="Ampere", compute_capability="8.6", form_factor="PCIe",
         memory_gib=24, memory_type="GDDR6", memory_bandwidth_gbs=600, fp64_tflops=None, fp32_tflops=31.2,
         tf32_tflops=62.5, fp16_tflops=125, bf16_tflops=125, pcie_gen=4, pcie_width=16, nvlink_gbs=None,
         power_w=150, gpu_class="datacenter-pcie", confidence="V",
         source=_S12 + " (A10 row); NVIDIA A10 datasheet as cited by Lightning", match=[r"a10"],
         l2_mb=6, l2_source=_L2_GA102 + "; the A10 is a GA102 with all of its 384-bit bus, "
         "https://www.nvidia.com/en-us/data-center/products/a10-gpu/"),
    _row(key="a10g", name="NVIDIA A10G", arch="Ampere", compute_capability="8.6", form_factor="PCIe",
         memory_gib=24, memory_type="GDDR6", memory_bandwidth_gbs=600, fp64_tflops=None, fp32_tflops=None,
         tf32_tflops=None, fp16_tflops=None, bf16_tflops=None, pcie_gen=4, pcie_width=16, nvlink_gbs=None,
         power_w=300, gpu_class="datacenter-pcie", confidence="U",
         source=_S12 + " (A10G row): no NVIDIA datasheet; memory per Baseten, power per DCGM target_power",
         notes="tensor peaks unverified (Lightning maps it to A10's 125): measure", match=[r"a10g"]),
    _row(key="a40", name="NVIDIA A40", arch="Ampere", compute_capability="8.6", form_factor="PCIe",
         memory_gib=48, memory_type="GDDR6", memory_bandwidth_gbs=None, fp64_tflops=None, fp32_tflops=None,
         tf32_tflops=None, fp16_tflops=None, bf16_tflops=None, pcie_gen=4, pcie_width=16, nvlink_gbs=None,
         power_w=None, gpu_class="datacenter-pcie", confidence="U",
         source=REFERENCE + " section 1.1 rule 2 (A40 runs FP32-accumulate at full rate, datasheet text on "
         "ecer.com); 48 GB per NVIDIA A40 datasheet; no peak figures in the reference",
         notes="peaks not in the reference: measure", match=[r"a40"]),
    _row(key="a100-pcie-40gb", name="NVIDIA A100 PCIe 40GB", arch="Ampere", compute_capability="8.0",
         form_factor="PCIe", memory_gib=40, memory_type="HBM2", memory_bandwidth_gbs=1555, fp64_tflops=9.7,
         fp32_tflops=19.5, tf32_tflops=156, fp16_tflops=312, bf16_tflops=312, pcie_gen=4, pcie_width=16,
         nvlink_gbs=600, power_w=250, gpu_class="datacenter-hbm", confidence="V",
         source=_S12 + " (A100 40GB PCIe row); NVIDIA A100 datasheet via stas00/Lightning",
         notes="NVLink only through a 2-GPU bridge",
         match=[r"a100[- ]pcie(?:[- ]\d+gb)?", r"a100[- ]\d+gb[- ]pcie"],
         l2_mb=40, l2_source=_L2_GA100),
    _row(key="a100-pcie-80gb", name="NVIDIA A100 PCIe 80GB", arch="Ampere", compute_capability="8.0",
         form_factor="PCIe", memory_gib=80, memory_type="HBM2e", memory_bandwidth_gbs=1935, fp64_tflops=9.7,
         fp32_tflops=19.5, tf32_tflops=156, fp16_tflops=312, bf16_tflops=312, pcie_gen=4, pcie_width=16,
         nvlink_gbs=600, power_w=300, gpu_class="datacenter-hbm", confidence="S",
         source=_S12 + " (A100 80GB PCIe row); NVIDIA A100 datasheet, bandwidth per thundercompute table",
         notes="NVLink only through a 2-GPU bridge",
         match=[r"a100[- ]pcie(?:[- ]\d+gb)?", r"a100[- ]\d+gb[- ]pcie"],
         l2_mb=40, l2_source=_L2_GA100),
    _row(key="a100-sxm4-40gb", name="NVIDIA A100 SXM4 40GB", arch="Ampere", compute_capability="8.0",
         form_factor="SXM", memory_gib=40, memory_type="HBM2", memory_bandwidth_gbs=1555, fp64_tflops=9.7,
         fp32_tflops=19.5, tf32_tflops=156, fp16_tflops=312, bf16_tflops=312, pcie_gen=4, pcie_width=16,
         nvlink_gbs=600, power_w=400, gpu_class="datacenter-hbm", confidence="V",
         source=_S12 + " (A100 40GB SXM4 row); NVIDIA A100 datasheet via stas00/Lightning",
         match=[r"a100[- ]sxm4?(?:[- ]\d+gb)?"],
         l2_mb=40, l2_source=_L2_GA100),
    _row(key="a100-sxm4-80gb", name="NVIDIA A100 SXM4 80GB", arch="Ampere", compute_capability="8.0",
         form_factor="SXM", memory_gib=80, memory_type="HBM2e", memory_bandwidth_gbs=2039, fp64_tflops=9.7,
         fp32_tflops=19.5, tf32_tflops=156, fp16_tflops=312, bf16_tflops=312, pcie_gen=4, pcie_width=16,
         nvlink_gbs=600, power_w=400, gpu_class="datacenter-hbm", confidence="V",
         source=_S12 + " (A100 80GB SXM4 row); NVIDIA A100 datasheet via stas00/Lightning",
         match=[r"a100[- ]sxm4?(?:[- ]\d+gb)?"],
         l2_mb=40, l2_source=_L2_GA100),
    _row(key="rtx-3090", name="NVIDIA GeForce RTX 3090", arch="Ampere", compute_capability="8.6",
         form_factor="GeForce", memory_gib=24, memory_type="GDDR6X", memory_bandwidth_gbs=936, fp64_tflops=None,
         fp32_tflops=35.6, tf32_tflops=35.6, fp16_tflops=71, bf16_tflops=71, fp16_acc16_tflops=142,
         pcie_gen=4, pcie_width=16, nvlink_gbs=112.5, power_w=350, gpu_class="geforce", confidence="S",
         source=_S12 + " (RTX 3090 row); GA102 whitepaper figures as quoted in modula PR #1",
         notes="FP16/BF16 with FP32 accumulate runs at half rate (section 1.1 rule 2)",
         match=[r"geforce rtx 3090"],
         l2_mb=6, l2_source=_L2_GA102 + " (RTX 3090 table)"),
    _row(key="rtx-a6000", name="NVIDIA RTX A6000", arch="Ampere", compute_capability="8.6",
         form_factor="workstation", memory_gib=48, memory_type="GDDR6", memory_bandwidth_gbs=768, fp64_tflops=None,
         fp32_tflops=38.7, tf32_tflops=77.4, fp16_tflops=154.8, bf16_tflops=154.8, pcie_gen=4, pcie_width=16,
         nvlink_gbs=112.5, power_w=300, gpu_class="workstation", confidence="S",
         source=_S12 + " (RTX A6000 row); Microway via llmperf.net, GA102 whitepaper appendix C",
         match=[r"rtx a6000"],
         l2_mb=6, l2_source=_L2_GA102 + " (RTX A6000 table)"),
    # ---- Ada Lovelace --------------------------------------------------------------------
    _row(key="l4", name="NVIDIA L4", arch="Ada Lovelace", compute_capability="8.9", form_factor="PCIe",
         memory_gib=24, memory_type="GDDR6", memory_bandwidth_gbs=300, fp64_tflops=None, fp32_tflops=30.3,
         tf32_tflops=60, fp16_tflops=121, bf16_tflops=121, pcie_gen=4, pcie_width=16, nvlink_gbs=None,
         power_w=72, gpu_class="datacenter-pcie", confidence="V",
         source=_S12 + " (L4 row); Ada whitepaper as cited by Lightning, sourcecode.com L4 datasheet copy",
         match=[r"l4"]),
    _row(key="l40s", name="NVIDIA L40S", arch="Ada Lovelace", compute_capability="8.9", form_factor="PCIe",
         memory_gib=48, memory_type="GDDR6", memory_bandwidth_gbs=864, fp64_tflops=None, fp32_tflops=91.6,
         tf32_tflops=183, fp16_tflops=362, bf16_tflops=362, pcie_gen=4, pcie_width=16, nvlink_gbs=None,
         power_w=350, gpu_class="datacenter-pcie", confidence="V",
         source=_S12 + " (L40S row); NVIDIA L40S product page as cited by stas00", match=[r"l40s"],
         l2_mb=96, l2_source=_L2_ADA + " (AD102: 98,304 KB L2); https://www.nvidia.com/en-us/data-center/l40s/"),
    _row(key="l40", name="NVIDIA L40", arch="Ada Lovelace", compute_capability="8.9", form_factor="PCIe",
         memory_gib=48, memory_type="GDDR6", memory_bandwidth_gbs=None, fp64_tflops=None, fp32_tflops=None,
         tf32_tflops=None, fp16_tflops=None, bf16_tflops=None, pcie_gen=4, pcie_width=16, nvlink_gbs=None,
         power_w=None, gpu_class="datacenter-pcie", confidence="U",
         source=REFERENCE + " section 1.1 rule 2 (the L40 datasheet shows FP32-accumulate at half rate); "
         "48 GB per NVIDIA L40 datasheet; no peak figures in the reference",
         notes="not an L40S: half-rate FP32-accumulate; peaks not in the reference, measure", match=[r"l40"]),
    _row(key="rtx-4090", name="NVIDIA GeForce RTX 4090", arch="Ada Lovelace", compute_capability="8.9",
         form_factor="GeForce", memory_gib=24, memory_type="GDDR6X", memory_bandwidth_gbs=1008, fp64_tflops=None,
         fp32_tflops=82.6, tf32_tflops=82.6, fp16_tflops=165.2, bf16_tflops=165.2, fp16_acc16_tflops=330.3,
         pcie_gen=4, pcie_width=16, nvlink_gbs=None, power_w=450, gpu_class="geforce", confidence="S",
         source=_S12 + " (RTX 4090 row); waredb, Ada whitepaper per Lightning source comment",
         notes="FP16/BF16 with FP32 accumulate runs at half rate (section 1.1 rule 2)",
         match=[r"geforce rtx 4090"],
         l2_mb=72, l2_source=_L2_ADA + " (RTX 4090: 73,728 KB L2); " + REFERENCE + " section 2.2 (its 72 MB L2)"),
    _row(key="rtx-6000-ada", name="NVIDIA RTX 6000 Ada Generation", arch="Ada Lovelace", compute_capability="8.9",
         form_factor="workstation", memory_gib=48, memory_type="GDDR6", memory_bandwidth_gbs=960, fp64_tflops=None,
         fp32_tflops=91.1, tf32_tflops=None, fp16_tflops=None, bf16_tflops=None, pcie_gen=4, pcie_width=16,
         nvlink_gbs=None, power_w=300, gpu_class="workstation", confidence="U",
         source=_S12 + " (RTX 6000 Ada row); datasheet gives only 1,457 TFLOPS FP8 sparse",
         notes="BF16 rate unverified (182 or 364 in public code tables): measure",
         match=[r"rtx 6000 ada generation", r"rtx 6000 ada"]),
    # ---- Hopper --------------------------------------------------------------------------
    _row(key="h100-sxm", name="NVIDIA H100 SXM5 80GB", arch="Hopper", compute_capability="9.0", form_factor="SXM",
         memory_gib=80, memory_type="HBM3", memory_bandwidth_gbs=3350, fp64_tflops=34, fp32_tflops=67,
         tf32_tflops=494.5, fp16_tflops=989, bf16_tflops=989, pcie_gen=5, pcie_width=16, nvlink_gbs=900,
         power_w=700, gpu_class="datacenter-hbm", confidence="V",
         source=_S12 + " (H100 SXM5 row); NVIDIA H100 datasheet table with the *with sparsity footnote "
         "(hpctech copy), stas00",
         match=[r"h100 80gb hbm3", r"h100-sxm5?(?:-\d+gb)?", r"h100 sxm5?(?: \d+gb)?"],
         l2_mb=50, l2_source=_L2_HOPPER),
    _row(key="h100-pcie", name="NVIDIA H100 PCIe", arch="Hopper", compute_capability="9.0", form_factor="PCIe",
         memory_gib=80, memory_type="HBM2e", memory_bandwidth_gbs=2000, fp64_tflops=26, fp32_tflops=51,
         tf32_tflops=378, fp16_tflops=756, bf16_tflops=756, pcie_gen=5, pcie_width=16, nvlink_gbs=600,
         power_w=350, gpu_class="datacenter-hbm", confidence="V",
         source=_S12 + " (H100 PCIe row); NVIDIA H100 datasheet table, product brief PB-11133",
         notes="NVLink only through a bridge", match=[r"h100 pcie", r"h100 80gb pcie", r"h100-pcie(?:-\d+gb)?"],
         l2_mb=50, l2_source=_L2_HOPPER),
    _row(key="h100-nvl", name="NVIDIA H100 NVL", arch="Hopper", compute_capability="9.0", form_factor="NVL",
         memory_gib=94, memory_type="HBM3", memory_bandwidth_gbs=3900, fp64_tflops=30, fp32_tflops=60,
         tf32_tflops=417.5, fp16_tflops=835.5, bf16_tflops=835.5, pcie_gen=5, pcie_width=16, nvlink_gbs=600,
         power_w=400, gpu_class="datacenter-hbm", confidence="U",
         source=_S12 + " (H100 NVL row, per GPU, 2024 sheet); memory/bandwidth S (stas00, DCGM SKU list)",
         notes="FLOPS unverified: the older sheet quoted a 2-GPU pair", match=[r"h100 nvl"]),
    _row(key="h200-sxm", name="NVIDIA H200 SXM", arch="Hopper", compute_capability="9.0", form_factor="SXM",
         memory_gib=141, memory_type="HBM3e", memory_bandwidth_gbs=4800, fp64_tflops=34, fp32_tflops=67,
         tf32_tflops=494.5, fp16_tflops=989, bf16_tflops=989, pcie_gen=5, pcie_width=16, nvlink_gbs=900,
         power_w=700, gpu_class="datacenter-hbm", confidence="V",
         source=_S12 + " (H200 SXM row); stas00 and NVIDIA H200 spec pages", match=[r"h200", r"h200 sxm"],
         l2_mb=50, l2_source=_L2_HOPPER + "; the H200 is that GH100 with HBM3e, "
         "https://www.nvidia.com/en-us/data-center/h200/"),
    _row(key="h200-nvl", name="NVIDIA H200 NVL", arch="Hopper", compute_capability="9.0", form_factor="NVL",
         memory_gib=141, memory_type="HBM3e", memory_bandwidth_gbs=4800, fp64_tflops=30, fp32_tflops=60,
         tf32_tflops=417.5, fp16_tflops=835.5, bf16_tflops=835.5, pcie_gen=5, pcie_width=16, nvlink_gbs=900,
         power_w=600, gpu_class="datacenter-hbm", confidence="U",
         source=_S12 + " (H200 NVL row, unverified; DCGM SKU 233b target_power 600 W fits)", match=[r"h200 nvl"]),
    # ---- Blackwell -----------------------------------------------------------------------
    _row(key="b200", name="NVIDIA B200", arch="Blackwell", compute_capability="10.0", form_factor="SXM",
         memory_gib=180, memory_type="HBM3e", memory_bandwidth_gbs=7700, fp64_tflops=37, fp32_tflops=75,
         tf32_tflops=1100, fp16_tflops=2250, bf16_tflops=2250, pcie_gen=5, pcie_width=16, nvlink_gbs=1800,
         power_w=1000, gpu_class="datacenter-hbm", confidence="S",
         source=_S12 + " (B200 HGX row); NVIDIA HGX table (zdszero copy), stas00 for 2,250 / 180 GB",
         notes="TF32 given as 1,100-1,125; the lower bound is kept", match=[r"b200"],
         l2_mb=126, l2_source=REFERENCE + " section 2.2 (Pitfall row: B200 ~126 MB); no NVIDIA figure cited"),
    _row(key="rtx-5090", name="NVIDIA GeForce RTX 5090", arch="Blackwell", compute_capability="12.0",
         form_factor="GeForce", memory_gib=32, memory_type="GDDR7", memory_bandwidth_gbs=None, fp64_tflops=None,
         fp32_tflops=None, tf32_tflops=None, fp16_tflops=None, bf16_tflops=None, pcie_gen=5, pcie_width=16,
         nvlink_gbs=None, power_w=None, gpu_class="geforce", confidence="U",
         source=REFERENCE + " section 2.5 names it (8x RTX 5090 PCIe, NVIDIA/nccl #1639) but gives no peak "
         "figures; 32 GB / compute capability 12.0 per NVIDIA's product page and CUDA GPU list",
         notes="peaks not in the reference: measure", match=[r"geforce rtx 5090"]),
]

_MIG_SUFFIX = re.compile(r"\s+mig\s+(\d+g\.\d+gb(?:\+\w+)*)\s*$", re.IGNORECASE)
_SIZE_IN_NAME = re.compile(r"(\d+)\s*gb\b")
_PREFIXES = ("nvidia ",)

for _r in SPECS:
    _r["_re"] = [re.compile(p) for p in _r["match"]]


def normalize_name(nvml_name):
    """Lower-case, collapse whitespace, drop the leading "NVIDIA " and any MIG profile suffix."""
    if isinstance(nvml_name, bytes):
        nvml_name = nvml_name.decode("utf-8", "replace")
    name = " ".join(str(nvml_name).split()).lower()
    name = _MIG_SUFFIX.sub("", name)
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def mig_profile(nvml_name):
    """Return the MIG profile ("1g.10gb") of a MIG device name, else None."""
    if isinstance(nvml_name, bytes):
        nvml_name = nvml_name.decode("utf-8", "replace")
    m = _MIG_SUFFIX.search(str(nvml_name or ""))
    return m.group(1).lower() if m else None


def public_row(row):
    """A copy of a row without the compiled patterns (JSON-safe)."""
    return {k: (list(v) if isinstance(v, list) else v) for k, v in row.items() if not k.startswith("_")}


def lookup(nvml_name, memory_total_mib=None):
    """Map a name as NVML / nvidia-smi reports it to a spec row (a copy), or None.

    Where several rows share a name pattern (V100 16/32 GB, A100 40/80 GB) the size in the name
    decides, else ``memory_total_mib``. Still ambiguous or unknown: None, never a guess.
    """
    if not nvml_name:
        return None
    name = normalize_name(nvml_name)
    candidates = [r for r in SPECS if any(p.fullmatch(name) for p in r["_re"])]
    if not candidates:
        return None
    if len(candidates) == 1:
        return public_row(candidates[0])
    size = None
    m = _SIZE_IN_NAME.search(name)
    if m:
        size = float(m.group(1))
    elif memory_total_mib:
        try:
            size = float(memory_total_mib) / 1024.0
        except (TypeError, ValueError):
            size = None
    if size is None:
        return None
    fits = [r for r in candidates if abs(r["memory_gib"] - size) <= 0.12 * r["memory_gib"]]
    if len(fits) != 1:
        return None
    return public_row(fits[0])


def by_key(key):
    """Row by its ``key`` (a copy), or None."""
    for r in SPECS:
        if r["key"] == key:
            return public_row(r)
    return None
