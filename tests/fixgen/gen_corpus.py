"""A corpus of model classes from torchvision, timm, transformers and diffusers, with random
weights and small configurations, exported into the git-ignored cache.

    .venv/bin/python tests/fixgen/gen_corpus.py [--only NAME,...] [--jobs N] [--out DIR]

Each model class is built with a tiny configuration (few layers, narrow widths, 64x64 images,
16-token sequences) and random weights (`torch.manual_seed(0)`; no downloads), run eagerly in
eval mode, and exported twice: training IR (`torch.export.export`) and core ATen
(`run_decompositions()`). Written to DIR (.cache/corpus):
  DIR/<library>/<name>.pt2          training IR (torch.export.save)
  DIR/<library>/<name>__core.pt2    core ATen
  DIR/<library>/<name>.io.safetensors   input_<i> (pytree-flattened (args, kwargs)) and
                                        output_<i> (pytree-flattened eager outputs)
  DIR/corpus.json   per model: library, class, config, inputs, outputs, per IR the archive,
                    the op histogram (call_function targets, subgraphs included) and torch's
                    own check (ep.module() against eager); a model torch cannot export is
                    listed with the reason; per library and IR the union of ops.
tests/corpus.rs runs every program on the CPU and the GPU backend against the eager outputs.

Random weights can make a comparison that cannot fail (zero-initialised heads give constant
logits, layer-scale 1e-6 hides a block, default BatchNorm statistics shrink activations), so
every near-zero weight gets a random value and BatchNorm statistics come from a few train-mode
passes over random inputs.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import traceback
import warnings
import zipfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import target_name  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
IMG = 64  # image side of the vision models


# ------------------------------------------------------------------------------------------
# random weights that make a meaningful comparison
# ------------------------------------------------------------------------------------------


def randomize(m: torch.nn.Module, calib=None) -> torch.nn.Module:
    """Give near-zero parameters random values; calibrate BatchNorm with train-mode passes
    of `calib()` inputs (if the model has BatchNorm); return `m` in eval mode."""
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if not p.is_floating_point() or p.numel() == 0 or p.abs().max() > 1e-4:
                continue
            if p.dim() > 1:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
            else:
                p.copy_(torch.rand(p.shape, generator=g) * 0.5 + 0.5)
        if calib is not None and any(isinstance(x, torch.nn.modules.batchnorm._BatchNorm) for x in m.modules()):
            m.train()
            for _ in range(3):
                args, kwargs = calib()
                m(*args, **kwargs)
    return m.eval()


def image(batch=1, side=IMG, ch=3):
    return torch.randn(batch, ch, side, side)


def vision(m, side=IMG):
    """A vision model on one [1, 3, side, side] image (BatchNorm calibrated on batches of 4)."""
    randomize(m, lambda: ((image(4, side),), {}))
    return m, (image(1, side),), {}


# ------------------------------------------------------------------------------------------
# torchvision
# ------------------------------------------------------------------------------------------


def tv_resnet(block_name, layers, div):
    from torchvision.models import resnet

    class NarrowResNet(resnet.ResNet):
        """torchvision's ResNet with every stage `div` times narrower (the class hard-codes
        64..512 channels; resnet18's 11.7 M parameters would take most of the cache)."""

        def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
            return super()._make_layer(block, planes // div, blocks, stride, dilate)

    block = getattr(resnet, block_name)
    m = NarrowResNet(block, layers, num_classes=10)
    m.fc = torch.nn.Linear(512 // div * block.expansion, 10)
    return vision(m)


def tv(name, **kw):
    import torchvision

    return lambda: vision(getattr(torchvision.models, name)(weights=None, num_classes=10, **kw))


def tv_efficientnet():
    from torchvision.models import efficientnet as e

    setting, last = e._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    return vision(e.EfficientNet(setting, 0.2, num_classes=10, last_channel=last))


def tv_efficientnet_v2():
    from torchvision.models import efficientnet as e
    from functools import partial

    setting = [e.FusedMBConvConfig(1, 3, 1, 8, 8, 1), e.FusedMBConvConfig(4, 3, 2, 8, 16, 1),
               e.MBConvConfig(4, 3, 2, 16, 32, 1), e.MBConvConfig(6, 3, 1, 32, 48, 1)]
    return vision(e.EfficientNet(setting, 0.2, num_classes=10, last_channel=128,
                                 norm_layer=partial(torch.nn.BatchNorm2d, eps=1e-3)))


def tv_regnet():
    from torchvision.models import regnet

    return vision(regnet.RegNet(regnet.BlockParams.from_init_params(depth=4, w_0=16, w_a=8.0, w_m=2.0,
                                                                    group_width=8), num_classes=10))


def tv_convnext():
    from torchvision.models import convnext as c

    cfg = [c.CNBlockConfig(16, 32, 1), c.CNBlockConfig(32, 64, 1), c.CNBlockConfig(64, 128, 1),
           c.CNBlockConfig(128, None, 1)]
    return vision(c.ConvNeXt(cfg, num_classes=10))


def tv_vit():
    from torchvision.models.vision_transformer import VisionTransformer

    return vision(VisionTransformer(image_size=IMG, patch_size=16, num_layers=2, num_heads=2, hidden_dim=64,
                                    mlp_dim=128, num_classes=10))


def tv_swin(v2=False):
    from torchvision.models import swin_transformer as s

    extra = dict(block=s.SwinTransformerBlockV2, downsample_layer=s.PatchMergingV2) if v2 else {}
    return vision(s.SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 2, 2, 4],
                                    window_size=[4, 4], num_classes=10, **extra))


def tv_maxvit():
    from torchvision.models.maxvit import MaxVit

    return vision(MaxVit(input_size=(IMG, IMG), stem_channels=16, partition_size=4, block_channels=[16, 32],
                         block_layers=[1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=10))


def tv_shufflenet():
    from torchvision.models.shufflenetv2 import ShuffleNetV2

    return vision(ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=10))


def tv_densenet():
    from torchvision.models.densenet import DenseNet

    return vision(DenseNet(growth_rate=8, block_config=(2, 2, 2, 2), num_init_features=16, num_classes=10))


def tv_mobilenet_v2():
    from torchvision.models.mobilenetv2 import MobileNetV2

    return vision(MobileNetV2(num_classes=10, width_mult=0.25))


def tv_mobilenet_v3():
    from torchvision.models import mobilenetv3 as mv

    setting, last = mv._mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.5)
    return vision(mv.MobileNetV3(setting, last, num_classes=10))


def tv_mnasnet():
    from torchvision.models.mnasnet import MNASNet

    return vision(MNASNet(0.25, num_classes=10))


class Fixed(torch.nn.Module):
    """`m` called with Python constants `fixed` as extra keyword arguments (a constant would
    otherwise be a non-tensor input of the exported program)."""

    def __init__(self, m, **fixed):
        super().__init__()
        self.m, self.fixed = m, fixed

    def forward(self, *args, **kwargs):
        return self.m(*args, **kwargs, **self.fixed)


def tv_raft():
    from torchvision.models.optical_flow import raft_small

    m = randomize(raft_small(weights=None))
    # (the correlation pyramid wants feature maps of 16x16 at least: images of 128x128)
    return Fixed(m, num_flow_updates=2).eval(), (image(1, 128), image(1, 128)), {}


def tv_lraspp():
    from torchvision.models import mobilenetv3 as mv
    from torchvision.models.segmentation.lraspp import _lraspp_mobilenetv3

    setting, last = mv._mobilenet_v3_conf("mobilenet_v3_large", width_mult=0.25, dilated=True)
    return vision(_lraspp_mobilenetv3(mv.MobileNetV3(setting, last), num_classes=4))


TORCHVISION = {
    "resnet_basic": lambda: tv_resnet("BasicBlock", [2, 2, 2, 2], 8),
    "resnet_bottleneck": lambda: tv_resnet("Bottleneck", [1, 1, 1, 1], 8),
    "mobilenet_v2": tv_mobilenet_v2,
    "mobilenet_v3_small": tv_mobilenet_v3,
    "efficientnet_b0": tv_efficientnet,
    "efficientnet_v2": tv_efficientnet_v2,
    "regnet": tv_regnet,
    "convnext": tv_convnext,
    "vit": tv_vit,
    "swin": tv_swin,
    "swin_v2": lambda: tv_swin(v2=True),
    "maxvit": tv_maxvit,
    "shufflenet_v2": tv_shufflenet,
    "squeezenet1_1": tv("squeezenet1_1"),
    "densenet": tv_densenet,
    "mnasnet": tv_mnasnet,
    "raft_small": tv_raft,
    "lraspp_mobilenet_v3": tv_lraspp,
}


# ------------------------------------------------------------------------------------------
# timm
# ------------------------------------------------------------------------------------------


def timm_model(name, side=IMG, create=None, **kw):
    """timm's `name` (pretrained=False, 10 classes) with `kw` overriding its configuration;
    `create`: timm's private builder (module, function) where the public one fixes the
    arguments to shrink."""

    def build():
        import importlib

        import timm

        if create:
            fn = getattr(importlib.import_module(f"timm.models.{create[0]}"), create[1])
            m = fn(name, pretrained=False, num_classes=10, **kw)
        else:
            m = timm.create_model(name, pretrained=False, num_classes=10, **kw)
        return vision(m, side)

    return build


def _poolformer(**kw):
    from timm.layers import GroupNorm1

    return dict(downsample_norm=None, mlp_act=torch.nn.GELU, mlp_bias=True, norm_layers=GroupNorm1,
                layer_scale_init_values=1e-5, res_scale_init_values=None, use_mlp_head=False, **kw)


TIMM = {
    "resnet": timm_model("resnet18", channels=(8, 16, 32, 64)),
    "resnet_d": timm_model("resnet26d", channels=(8, 16, 32, 64), stem_width=8),
    "efficientnet": timm_model("efficientnet_b0", create=("efficientnet", "_gen_efficientnet"),
                               channel_multiplier=0.25, depth_multiplier=0.25),
    "mobilenetv3": timm_model("mobilenetv3_small_050"),
    "vit": timm_model("vit_tiny_patch16_224", img_size=IMG, depth=2, embed_dim=64, num_heads=2),
    "deit_distilled": timm_model("deit_tiny_distilled_patch16_224", img_size=IMG, depth=2, embed_dim=64,
                                 num_heads=2),
    "convnext": timm_model("convnext_atto", depths=(1, 1, 1, 1), dims=(16, 32, 64, 128)),
    "mixer": timm_model("mixer_s16_224", create=("mlp_mixer", "_create_mixer"), img_size=IMG, patch_size=16,
                        num_blocks=2, embed_dim=64),
    "levit": timm_model("levit_128s", img_size=IMG, embed_dim=(32, 48, 64), key_dim=8, num_heads=(2, 3, 4),
                        depth=(1, 1, 1)),
    "mobilevit": timm_model("mobilevit_xxs"),
    "swin": timm_model("swin_tiny_patch4_window7_224", img_size=IMG, window_size=4, embed_dim=16,
                       depths=(1, 1, 1, 1), num_heads=(1, 2, 2, 4)),
    "poolformer": lambda: timm_model("poolformer_s12", create=("metaformer", "_create_metaformer"),
                                     **_poolformer(depths=(1, 1, 1, 1), dims=(16, 32, 64, 128)))(),
    "ghostnet": timm_model("ghostnet_050", create=("ghostnet", "_create_ghostnet"), width=0.25),
    "eva02": timm_model("eva02_tiny_patch14_224", side=56, img_size=56, depth=2, embed_dim=64, num_heads=2),
    "beit": timm_model("beit_base_patch16_224", img_size=IMG, depth=2, embed_dim=64, num_heads=2),
    "xcit": timm_model("xcit_nano_12_p16_224", img_size=IMG, depth=2, embed_dim=64, num_heads=2),
}


# ------------------------------------------------------------------------------------------
# transformers (tiny configs; 16 tokens, batch 1, the last 3 tokens padded where a mask applies)
# ------------------------------------------------------------------------------------------

VOCAB, SEQ = 1000, 16
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
            vocab_size=VOCAB, max_position_embeddings=64)


def ids(seq=SEQ):
    return torch.randint(0, VOCAB, (1, seq), generator=torch.Generator().manual_seed(2))


def mask(seq=SEQ):
    m = torch.ones(1, seq, dtype=torch.int64)
    m[0, -3:] = 0
    return m


def hf(model_cls, config_cls, kwargs_fn, **cfg):
    def build():
        import transformers

        torch.manual_seed(0)
        config = getattr(transformers, config_cls)(**cfg)
        m = getattr(transformers, model_cls)(config)
        randomize(m)
        return m, (), kwargs_fn()

    return build


def text():
    return {"input_ids": ids(), "attention_mask": mask()}


def causal():
    return {"input_ids": ids()}


DECODER = dict(TINY, num_key_value_heads=1, use_cache=False, tie_word_embeddings=False)

TRANSFORMERS = {
    "bert": hf("BertModel", "BertConfig", text, **TINY),
    "distilbert": hf("DistilBertModel", "DistilBertConfig", text, dim=64, n_layers=2, n_heads=2, hidden_dim=128,
                     vocab_size=VOCAB, max_position_embeddings=64),
    "roberta": hf("RobertaModel", "RobertaConfig", text, **dict(TINY, max_position_embeddings=80)),
    "albert": hf("AlbertModel", "AlbertConfig", text, **dict(TINY, embedding_size=32)),
    "electra": hf("ElectraForSequenceClassification", "ElectraConfig", text, **dict(TINY, embedding_size=32)),
    "gpt2": hf("GPT2LMHeadModel", "GPT2Config", causal, n_embd=64, n_layer=2, n_head=2, vocab_size=VOCAB,
               n_positions=64, use_cache=False),
    "llama": hf("LlamaForCausalLM", "LlamaConfig", causal, **DECODER),
    "mistral": hf("MistralForCausalLM", "MistralConfig", causal, **DECODER),
    "qwen2": hf("Qwen2ForCausalLM", "Qwen2Config", causal, **DECODER),
    "gemma": hf("GemmaForCausalLM", "GemmaConfig", causal, **dict(DECODER, head_dim=32)),
    "phi3": hf("Phi3ForCausalLM", "Phi3Config", causal, **dict(DECODER, pad_token_id=0)),
    "t5_encoder": hf("T5EncoderModel", "T5Config", text, d_model=64, d_kv=32, d_ff=128, num_layers=2,
                     num_heads=2, vocab_size=VOCAB),
    "bart": hf("BartModel", "BartConfig", text, d_model=64, encoder_layers=1, decoder_layers=1,
               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128, decoder_ffn_dim=128,
               vocab_size=VOCAB, max_position_embeddings=64, use_cache=False),
    "vit": hf("ViTForImageClassification", "ViTConfig", lambda: {"pixel_values": image(1, 32)},
              **dict(TINY, image_size=32, patch_size=8, num_labels=10)),
    "clip": hf("CLIPModel", "CLIPConfig",
               lambda: {"input_ids": ids(), "pixel_values": image(1, 32), "attention_mask": mask()},
               text_config=dict(TINY), vision_config=dict(TINY, image_size=32, patch_size=8),
               projection_dim=32),
    "whisper_encoder": hf("WhisperForAudioClassification", "WhisperConfig",
                          lambda: {"input_features": torch.randn(1, 16, 64)},
                          d_model=64, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=128,
                          decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=128, num_mel_bins=16,
                          max_source_positions=32, vocab_size=VOCAB, num_labels=4),
    "llama4_text": hf("Llama4ForCausalLM", "Llama4TextConfig", causal,
                      **dict(DECODER, head_dim=32, intermediate_size_mlp=128, num_local_experts=2,
                             attention_chunk_size=8, no_rope_layers=[1, 0])),
    "deepseek_v2": hf("DeepseekV2ForCausalLM", "DeepseekV2Config", causal,
                      **dict(DECODER, num_key_value_heads=2, moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2,
                             n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=None,
                             qk_nope_head_dim=16, qk_rope_head_dim=16, v_head_dim=16, n_group=1, topk_group=1)),
    "encodec": hf("EncodecModel", "EncodecConfig", lambda: {"input_values": torch.randn(1, 1, 800)},
                  hidden_size=32, num_filters=8, upsampling_ratios=(4, 2), codebook_size=64, num_lstm_layers=1,
                  target_bandwidths=(1.5,), sampling_rate=800),
    "segformer": hf("SegformerForSemanticSegmentation", "SegformerConfig", lambda: {"pixel_values": image(1)},
                    num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
                    patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
                    decoder_hidden_size=32, num_labels=4),
    "wav2vec2": hf("Wav2Vec2Model", "Wav2Vec2Config", lambda: {"input_values": torch.randn(1, 1600)},
                   **dict(TINY, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                          num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)),
}


# ------------------------------------------------------------------------------------------
# diffusers (tiny configs; return_dict=False)
# ------------------------------------------------------------------------------------------


def df(cls, inputs, **cfg):
    def build():
        import diffusers

        torch.manual_seed(0)
        m = getattr(diffusers, cls)(**cfg)
        randomize(m)
        args, kwargs = inputs()
        return Fixed(m, return_dict=False).eval(), args, kwargs

    return build


def latent(ch=4, side=16):
    return torch.randn(1, ch, side, side)


def t():
    return torch.tensor([10.0])


DIFFUSERS = {
    "unet2d": df("UNet2DModel", lambda: ((latent(3), t()), {}), sample_size=16, in_channels=3, out_channels=3,
                 block_out_channels=(16, 32), layers_per_block=1, norm_num_groups=8,
                 down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D")),
    "unet2d_condition": df("UNet2DConditionModel",
                           lambda: ((latent(), t(), torch.randn(1, 4, 16)), {}),
                           sample_size=16, block_out_channels=(16, 32), layers_per_block=1, norm_num_groups=8,
                           cross_attention_dim=16, attention_head_dim=4,
                           down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                           up_block_types=("UpBlock2D", "CrossAttnUpBlock2D")),
    "autoencoder_kl": df("AutoencoderKL", lambda: ((latent(3, 32),), {}), block_out_channels=(16, 32),
                         down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                         latent_channels=4, norm_num_groups=8),
    "autoencoder_tiny": df("AutoencoderTiny", lambda: ((latent(3, 32),), {}), encoder_block_out_channels=(16, 16),
                           decoder_block_out_channels=(16, 16), num_encoder_blocks=(1, 1),
                           num_decoder_blocks=(1, 1), latent_channels=4),
    "dit": df("DiTTransformer2DModel", lambda: ((latent(4, 8),), {"timestep": t().long(),
                                                                  "class_labels": torch.tensor([3])}),
              num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, num_layers=1,
              sample_size=8, patch_size=2, num_embeds_ada_norm=10),
    "sd3_transformer": df("SD3Transformer2DModel",
                          lambda: ((latent(4, 8),), {"encoder_hidden_states": torch.randn(1, 6, 16),
                                                     "pooled_projections": torch.randn(1, 16), "timestep": t()}),
                          sample_size=8, patch_size=2, in_channels=4, num_layers=1, attention_head_dim=8,
                          num_attention_heads=2, joint_attention_dim=16, caption_projection_dim=16,
                          pooled_projection_dim=16, out_channels=4, pos_embed_max_size=16),
    "flux_transformer": df("FluxTransformer2DModel",
                           lambda: ((), {"hidden_states": torch.randn(1, 16, 16),
                                         "encoder_hidden_states": torch.randn(1, 6, 16),
                                         "pooled_projections": torch.randn(1, 16), "timestep": t() / 1000,
                                         "img_ids": torch.zeros(16, 3), "txt_ids": torch.zeros(6, 3)}),
                           patch_size=1, in_channels=16, num_layers=1, num_single_layers=1, attention_head_dim=8,
                           num_attention_heads=2, joint_attention_dim=16, pooled_projection_dim=16,
                           axes_dims_rope=(2, 2, 4)),
}

DIFFUSERS.update({
    "vq_model": df("VQModel", lambda: ((latent(3, 32),), {}), block_out_channels=(16, 32),
                   down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                   latent_channels=4, norm_num_groups=8, num_vq_embeddings=32, vq_embed_dim=4),
    "unet3d_condition": df("UNet3DConditionModel",
                           lambda: ((torch.randn(1, 4, 2, 16, 16), t(), torch.randn(1, 4, 16)), {}),
                           sample_size=16, block_out_channels=(16, 32), layers_per_block=1, norm_num_groups=8,
                           cross_attention_dim=16, attention_head_dim=4,
                           down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
                           up_block_types=("UpBlock3D", "CrossAttnUpBlock3D")),
})

LIBRARIES = {"torchvision": TORCHVISION, "timm": TIMM, "transformers": TRANSFORMERS, "diffusers": DIFFUSERS}


# ------------------------------------------------------------------------------------------
# export
# ------------------------------------------------------------------------------------------


def op_histogram(ep) -> dict:
    """call_function targets of the program, its subgraphs included, with their counts."""
    h = {}
    for gm in ep.graph_module.modules():
        for n in getattr(gm, "graph", torch.fx.Graph()).nodes:
            if n.op == "call_function":
                k = target_name(n.target)
                h[k] = h.get(k, 0) + 1
    return dict(sorted(h.items()))


def deflate_json(path: Path) -> None:
    """Recompress the archive's JSON entries (the graphs: 40 MB of the corpus stored, 5 MB
    deflated); the weights stay stored (random values do not compress). pt2web reads both;
    torch.export.load wants stored entries, so only the cache's copies are rewritten."""
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
        for info in src.infolist():
            kind = zipfile.ZIP_DEFLATED if info.filename.endswith(".json") else zipfile.ZIP_STORED
            dst.writestr(info.filename, src.read(info.filename), compress_type=kind, compresslevel=6)
    tmp.replace(path)


def tensor_desc(t):
    return [str(t.dtype).replace("torch.", ""), list(t.shape)]


def max_diff(a, b) -> float:
    la, lb = pytree.tree_leaves(a), pytree.tree_leaves(b)
    la = [x for x in la if isinstance(x, torch.Tensor)]
    lb = [x for x in lb if isinstance(x, torch.Tensor)]
    if len(la) != len(lb):
        return float("inf")
    d = 0.0
    for x, y in zip(la, lb):
        if x.shape != y.shape:
            return float("inf")
        if x.numel():
            d = max(d, (x.double() - y.double()).abs().max().item())
    return d


def first_line(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}".strip().splitlines()
    return (s[0] if s else type(e).__name__)[:300]


def build_one(library: str, name: str, out_dir: Path) -> dict:
    entry = {"name": name, "library": library}
    t0 = time.time()
    try:
        torch.manual_seed(0)
        model, args, kwargs = LIBRARIES[library][name]()
    except Exception as e:
        entry["error"] = "build: " + first_line(e)
        return entry
    inner = model.m if isinstance(model, Fixed) else model
    entry["class"] = f"{type(inner).__module__}.{type(inner).__qualname__}"
    entry["parameters"] = sum(p.numel() for p in model.parameters())
    try:
        with torch.no_grad():
            eager = model(*args, **kwargs)
    except Exception as e:
        entry["error"] = "eager call: " + first_line(e)
        return entry
    ins = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
    outs = [x for x in pytree.tree_leaves(eager) if isinstance(x, torch.Tensor)]
    entry["inputs"] = [tensor_desc(x) for x in ins]
    entry["outputs"] = [tensor_desc(x) for x in outs]
    # A constant output cannot tell a right answer from a wrong one.
    entry["degenerate_outputs"] = [i for i, o in enumerate(outs)
                                   if o.is_floating_point() and o.numel() > 1 and (o.max() - o.min()) < 1e-4]
    lib_dir = out_dir / library
    lib_dir.mkdir(parents=True, exist_ok=True)
    tensors = {f"input_{i}": x.contiguous().clone() for i, x in enumerate(ins)}
    tensors.update({f"output_{i}": x.detach().contiguous().clone() for i, x in enumerate(outs)})
    save_file(tensors, str(lib_dir / f"{name}.io.safetensors"))
    entry["io"] = f"{library}/{name}.io.safetensors"
    entry["programs"] = {}
    ep = None
    for ir, suffix in (("training", ""), ("core_aten", "__core")):
        prog = {"archive": f"{library}/{name}{suffix}.pt2"}
        t1 = time.time()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if ir == "training":
                    ep = torch.export.export(model, args, kwargs, strict=False)
                    p = ep
                else:
                    if ep is None:
                        raise RuntimeError("the training IR did not export")
                    p = ep.run_decompositions()
            n_user = len(p.graph_signature.user_inputs)
            if n_user != len(ins):
                raise RuntimeError(f"{n_user} user inputs, {len(ins)} tensors given")
            torch.export.save(p, str(out_dir / prog["archive"]))
            deflate_json(out_dir / prog["archive"])
            prog["ops"] = op_histogram(p)
            # torch's own check: the exported program against eager (what pt2web is held to).
            with torch.no_grad():
                prog["torch_max_abs_diff"] = max_diff(p.module()(*args, **kwargs), eager)
        except Exception as e:
            prog = {"error": first_line(e)}
        prog["seconds"] = round(time.time() - t1, 2)
        entry["programs"][ir] = prog
    entry["seconds"] = round(time.time() - t0, 2)
    return entry


def _work(task):
    library, name, out_dir = task
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    try:
        return build_one(library, name, Path(out_dir))
    except Exception as e:
        traceback.print_exc()
        return {"name": name, "library": library, "error": "generator: " + first_line(e)}


def versions() -> dict:
    import importlib.metadata as md

    return {p: md.version(p) for p in ("torch", "torchvision", "timm", "transformers", "diffusers")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated model names or library/name (default: all)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    ap.add_argument("--out", default=str(ROOT / ".cache" / "corpus"))
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    out_dir = Path(a.out)
    only = {o for o in a.only.split(",") if o}
    tasks = [(lib, name, str(out_dir)) for lib, models in LIBRARIES.items() for name in models
             if not only or name in only or f"{lib}/{name}" in only or lib in only]
    if not only:
        for f in out_dir.glob("*/*"):
            f.unlink()
    out_dir.mkdir(parents=True, exist_ok=True)
    # Imported once here; the forked workers inherit them.
    import diffusers  # noqa: F401
    import timm  # noqa: F401
    import torchvision  # noqa: F401
    import transformers  # noqa: F401

    t0 = time.time()
    results = {}
    with multiprocessing.get_context("fork").Pool(a.jobs) as pool:
        for e in pool.imap_unordered(_work, tasks):
            results[(e["library"], e["name"])] = e
            status = e.get("error") or "; ".join(f"{ir}: {p.get('error', 'ok')}"
                                                  for ir, p in e.get("programs", {}).items())
            print(f"  {e['library']}/{e['name']} ({e.get('seconds', 0):.1f}s): {status}", file=sys.stderr, flush=True)
    summary_path = out_dir / "corpus.json"
    models = []
    if only and summary_path.exists():
        old = json.loads(summary_path.read_text())
        models = [m for m in old["models"] if (m["library"], m["name"]) not in results]
    models += list(results.values())
    order = {(lib, n): i for i, (lib, n, _) in enumerate(
        (lib, n, 0) for lib, ms in LIBRARIES.items() for n in ms)}
    models.sort(key=lambda m: order.get((m["library"], m["name"]), 1 << 30))
    ops = {}
    for m in models:
        for ir, p in m.get("programs", {}).items():
            u = ops.setdefault(m["library"], {}).setdefault(ir, set())
            u.update(p.get("ops", {}))
    ops = {lib: {ir: sorted(s) for ir, s in irs.items()} for lib, irs in ops.items()}
    failed = [f"{m['library']}/{m['name']}" + (f" [{ir}]" if ir else "")
              for m in models
              for ir in ([None] if "error" in m else [ir for ir, p in m["programs"].items() if "error" in p])]
    summary_path.write_text(json.dumps({
        "versions": versions(), "seconds": round(time.time() - t0, 1),
        "exported_programs": sum(1 for m in models for p in m.get("programs", {}).values() if "error" not in p),
        "export_failures": failed, "ops_per_library": ops, "models": models}, indent=1))
    size = sum(f.stat().st_size for f in out_dir.rglob("*") if f.is_file())
    print(f"{out_dir}: {len(models)} models, {len(failed)} export failures, {size / 1e6:.1f} MB, "
          f"{time.time() - t0:.0f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
