"""transformers architectures that the GPU perf zoo does not use, checked on the CPU with the GPU-only
fusions (`kiln --gpuFusions`) against ONNX Runtime, with what stays unfused: where a GPU build would
run a model as many small layers (an attention that did not fuse, a norm or an activation spelled out
op by op), found without a GPU. Small configs (2 layers, hidden 128-256), random weights
(peers.randomize; the model's own initialization where that fails), batch 2, sequence 64, exported as the zoo
exports (opset 17; 18 where an op needs it).

Per model: error vs ORT (max |kiln - ort| / range(ort), bar 1e-4), the fused engine's layer count,
its Attention layers against the model's attention count, and the leftover ops that a fused engine
should not have (Softmax, Transpose, Erf, Pow, ReduceMean, Sigmoid, Tanh, Where, ...).
Needs torch, transformers, onnx, onnxruntime.
With --timm a,b (--torchvision a,b): those timm (torchvision) models instead (image batch 2 at the
model's input size). With --dynamic: exported with a dynamic batch (and sequence) and built with a
profile around the run shape (the dynamic-shape forms of the same fusions).
Usage: hf_fusion_sweep.py --kiln build/bin/kiln --peers PEERS.py [--models a,b | --timm a,b | --torchvision a,b]
       [--work DIR]"""
import argparse, collections, importlib.util, os, sys, warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
warnings.filterwarnings("ignore")

# name -> (model class, config class, config kwargs, call form, attention layers expected)
# call forms: "ids" (input_ids), "ids_mask" (ids + an all-ones mask), "encdec" (ids, decoder ids),
# "pixels" (pixel_values 224x224).
SMALL = dict(num_hidden_layers=2, num_attention_heads=4, vocab_size=1000)
MODELS = collections.OrderedDict([
    ("gemma", ("GemmaModel", "GemmaConfig", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=2, head_dim=64,
                                                  max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("mistral", ("MistralModel", "MistralConfig", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=2,
                                                        max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("phi", ("PhiModel", "PhiConfig", dict(hidden_size=256, intermediate_size=512, partial_rotary_factor=0.5,
                                            max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("gpt_neox", ("GPTNeoXModel", "GPTNeoXConfig", dict(hidden_size=256, intermediate_size=512, rotary_pct=0.25,
                                                         max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("falcon_mqa", ("FalconModel", "FalconConfig", dict(hidden_size=256, multi_query=True, new_decoder_architecture=False,
                                                         parallel_attn=True, **SMALL), "ids_mask", 2)),
    ("bloom_alibi", ("BloomModel", "BloomConfig", dict(hidden_size=256, n_layer=2, n_head=4, vocab_size=1000), "ids_mask", 2)),
    ("opt", ("OPTModel", "OPTConfig", dict(hidden_size=256, ffn_dim=512, max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("gptj", ("GPTJModel", "GPTJConfig", dict(n_embd=256, n_layer=2, n_head=4, rotary_dim=32, vocab_size=1000,
                                               n_positions=256), "ids_mask", 2)),
    ("gptj_full_rotary", ("GPTJModel", "GPTJConfig", dict(n_embd=256, n_layer=2, n_head=4, rotary_dim=64, vocab_size=1000,
                                                           n_positions=256), "ids_mask", 2)),
    ("codegen", ("CodeGenModel", "CodeGenConfig", dict(n_embd=256, n_layer=2, n_head=4, rotary_dim=32, vocab_size=1000,
                                                        n_positions=256, n_ctx=256), "ids_mask", 2)),
    ("gpt_bigcode_mqa", ("GPTBigCodeModel", "GPTBigCodeConfig", dict(n_embd=256, n_layer=2, n_head=4, multi_query=True,
                                                                     vocab_size=1000, n_positions=256), "ids_mask", 2)),
    ("mpt_alibi", ("MptModel", "MptConfig", dict(d_model=256, n_layers=2, n_heads=4, vocab_size=1000, max_seq_len=256), "ids_mask", 2)),
    ("stablelm", ("StableLmModel", "StableLmConfig", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=2,
                                                           max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("starcoder2", ("Starcoder2Model", "Starcoder2Config", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=2,
                                                                 max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("phi3_fused_qkv", ("Phi3Model", "Phi3Config", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=2,
                                                         max_position_embeddings=256, pad_token_id=0, **SMALL), "ids_mask", 2)),
    ("qwen3_qk_norm", ("Qwen3Model", "Qwen3Config", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=2, head_dim=64,
                                                          max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("gemma2_softcap", ("Gemma2Model", "Gemma2Config", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=2, head_dim=64,
                                                             max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("olmo", ("OlmoModel", "OlmoConfig", dict(hidden_size=256, intermediate_size=512, max_position_embeddings=256, **SMALL),
              "ids_mask", 2)),
    ("cohere", ("CohereModel", "CohereConfig", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=2,
                                                     max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("persimmon", ("PersimmonModel", "PersimmonConfig", dict(hidden_size=256, intermediate_size=512, max_position_embeddings=256,
                                                              **SMALL), "ids_mask", 2)),
    ("xglm", ("XGLMModel", "XGLMConfig", dict(d_model=256, num_layers=2, attention_heads=4, ffn_dim=512, vocab_size=1000,
                                               max_position_embeddings=256), "ids_mask", 2)),
    ("biogpt", ("BioGptModel", "BioGptConfig", dict(hidden_size=256, intermediate_size=512, max_position_embeddings=256, **SMALL),
                "ids_mask", 2)),
    ("mobilebert", ("MobileBertModel", "MobileBertConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                                                 num_attention_heads=4, vocab_size=1000), "ids_mask", 2)),
    ("squeezebert", ("SqueezeBertModel", "SqueezeBertConfig", dict(hidden_size=256, intermediate_size=512, embedding_size=256,
                                                                   **SMALL), "ids_mask", 2)),
    ("convbert", ("ConvBertModel", "ConvBertConfig", dict(hidden_size=256, intermediate_size=512, embedding_size=256, **SMALL),
                  "ids_mask", 2)),
    ("roformer", ("RoFormerModel", "RoFormerConfig", dict(hidden_size=256, intermediate_size=512, embedding_size=256, **SMALL),
                  "ids_mask", 2)),
    ("distilbert", ("DistilBertModel", "DistilBertConfig", dict(dim=256, hidden_dim=512, n_layers=2, n_heads=4,
                                                                 vocab_size=1000), "ids_mask", 2)),
    ("albert", ("AlbertModel", "AlbertConfig", dict(hidden_size=256, intermediate_size=512, embedding_size=128, **SMALL),
                "ids_mask", 2)),
    ("electra", ("ElectraModel", "ElectraConfig", dict(hidden_size=256, intermediate_size=512, embedding_size=128, **SMALL),
                 "ids_mask", 2)),
    ("roberta", ("RobertaModel", "RobertaConfig", dict(hidden_size=256, intermediate_size=512, **SMALL), "ids_mask", 2)),
    ("mpnet_relpos", ("MPNetModel", "MPNetConfig", dict(hidden_size=256, intermediate_size=512, **SMALL), "ids_mask", 2)),
    ("t5v11_geglu", ("T5EncoderModel", "T5Config", dict(d_model=256, d_ff=512, d_kv=64, num_layers=2, num_heads=4,
                                                         vocab_size=1000, feed_forward_proj="gated-gelu"), "ids", 2)),
    ("bart", ("BartModel", "BartConfig", dict(d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                               decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512,
                                               vocab_size=1000, max_position_embeddings=256), "encdec", 6)),
    ("vit_mae_enc", ("ViTModel", "ViTConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                                    num_attention_heads=4), "pixels", 2)),
    ("beit_relpos", ("BeitModel", "BeitConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                                      num_attention_heads=4, use_relative_position_bias=True), "pixels", 2)),
    ("dinov2_layerscale", ("Dinov2Model", "Dinov2Config", dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                                                                mlp_ratio=2), "pixels", 2)),
    ("clip_vision", ("CLIPVisionModel", "CLIPVisionConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                                                  num_attention_heads=4, image_size=224, patch_size=32),
                     "pixels", 2)),
    ("convnextv2_grn", ("ConvNextV2Model", "ConvNextV2Config", dict(depths=[1, 1, 1, 1], hidden_sizes=[32, 64, 128, 256]),
                        "pixels", 0)),
    ("swin", ("SwinModel", "SwinConfig", dict(embed_dim=32, depths=[1, 1, 2, 1], num_heads=[1, 2, 4, 8]), "pixels", 5)),
    ("swinv2", ("Swinv2Model", "Swinv2Config", dict(embed_dim=32, depths=[1, 1, 2, 1], num_heads=[1, 2, 4, 8]), "pixels", 5)),
    ("levit", ("LevitModel", "LevitConfig", dict(), "pixels", 12)),
    # Session 38: more architectures, as a new user would bring them.
    ("deberta_v1", ("DebertaModel", "DebertaConfig", dict(hidden_size=256, intermediate_size=512, relative_attention=True,
                                                         max_relative_positions=64, pos_att_type=["c2p", "p2c"], **SMALL), "ids_mask", 2)),
    ("funnel", ("FunnelBaseModel", "FunnelConfig", dict(d_model=256, d_inner=512, n_head=4, d_head=64, block_sizes=[1, 1],
                                                      vocab_size=1000), "ids_mask", 2)),
    ("xlnet", ("XLNetModel", "XLNetConfig", dict(d_model=256, d_inner=512, n_layer=2, n_head=4, vocab_size=1000), "ids_mask", 2)),
    ("longformer", ("LongformerModel", "LongformerConfig", dict(hidden_size=256, intermediate_size=512, attention_window=[16, 16],
                                                               **SMALL), "ids_mask", 2)),
    ("bigbird_full", ("BigBirdModel", "BigBirdConfig", dict(hidden_size=256, intermediate_size=512, attention_type="original_full",
                                                           **SMALL), "ids_mask", 2)),
    ("mbart", ("MBartModel", "MBartConfig", dict(d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                                decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512,
                                                vocab_size=1000, max_position_embeddings=256), "encdec", 6)),
    ("pegasus", ("PegasusModel", "PegasusConfig", dict(d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                                      decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512,
                                                      vocab_size=1000, max_position_embeddings=256), "encdec", 6)),
    ("marian", ("MarianModel", "MarianConfig", dict(d_model=256, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                                   decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512,
                                                   vocab_size=1000, max_position_embeddings=256, pad_token_id=0,
                                                   decoder_start_token_id=0), "encdec", 6)),
    ("layoutlm", ("LayoutLMModel", "LayoutLMConfig", dict(hidden_size=256, intermediate_size=512, **SMALL), "ids_mask", 2)),
    ("ibert", ("IBertModel", "IBertConfig", dict(hidden_size=256, intermediate_size=512, **SMALL), "ids_mask", 2)),
    ("nezha", ("ErnieModel", "ErnieConfig", dict(hidden_size=256, intermediate_size=512, **SMALL), "ids_mask", 2)),
    ("llama", ("LlamaModel", "LlamaConfig", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=1,
                                                max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("qwen2", ("Qwen2Model", "Qwen2Config", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=2,
                                                max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("granite", ("GraniteModel", "GraniteConfig", dict(hidden_size=256, intermediate_size=512, num_key_value_heads=2,
                                                      max_position_embeddings=256, **SMALL), "ids_mask", 2)),
    ("yolos", ("YolosModel", "YolosConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                                                image_size=[224, 224], num_detection_tokens=10), "pixels", 2)),
    ("deit_hf", ("DeiTModel", "DeiTConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                                                num_attention_heads=4), "pixels", 2)),
    ("data2vec_vision", ("Data2VecVisionModel", "Data2VecVisionConfig", dict(hidden_size=256, intermediate_size=512,
                                                                             num_hidden_layers=2, num_attention_heads=4,
                                                                             use_relative_position_bias=True), "pixels", 2)),
])


def make_timm(name):
    """A timm model (random weights) and an image batch of 2 at its default input size."""
    import timm
    import torch
    m = timm.create_model(name, pretrained=False).eval()
    size = m.pretrained_cfg.get("input_size", (3, 224, 224))
    return m, torch.randn(2, *size, generator=torch.Generator().manual_seed(0))


def make_torchvision(name):
    """A torchvision classification model (random weights) and an image batch of 2 at 224x224."""
    import torch
    import torchvision
    m = torchvision.models.get_model(name, weights=None).eval()
    return m, torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))


def make(name):
    import torch
    import transformers
    cls, cfg_cls, kw, form, _ = MODELS[name]
    config = getattr(transformers, cfg_cls)(**kw)
    if hasattr(config, "use_cache"):
        config.use_cache = False
    config._attn_implementation = "eager"
    m = getattr(transformers, cls)(config).eval()

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            if form == "ids":
                out = self.m(input_ids=x)
            elif form == "ids_mask":
                out = self.m(input_ids=x, attention_mask=torch.ones_like(x))
            elif form == "encdec":
                out = self.m(input_ids=x, decoder_input_ids=x[:, : x.shape[1] // 2])
            else:
                out = self.m(pixel_values=x)
            return out.last_hidden_state
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 224, 224, generator=g) if form == "pixels" else torch.randint(1, 1000, (2, 64), generator=g)
    return Wrap().eval(), x


LEFTOVER = ("Softmax", "Transpose", "Erf", "Pow", "ReduceMean", "Sigmoid", "Tanh", "Where", "Sqrt", "Div", "Mul", "Add",
            "Gather", "Slice", "Concat", "Expand", "Cast", "MatMul")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--peers", required=True, help="peers.py (../shared/bench/peers.py)")
    ap.add_argument("--models", default="")
    ap.add_argument("--timm", default="", help="timm model names to sweep instead (attention count not known: '?')")
    ap.add_argument("--torchvision", default="", help="torchvision model names to sweep instead (as --timm)")
    ap.add_argument("--dynamic", action="store_true",
                    help="export with a dynamic batch (and sequence, for ids) and build with a profile around the run shape")
    ap.add_argument("--work", default="/tmp/kiln_hf_sweep")
    a = ap.parse_args()
    import torch
    import onnxruntime as ort

    import zoo_cpu_fusions
    spec = importlib.util.spec_from_file_location("peers", a.peers)
    peers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(peers)
    os.makedirs(a.work, exist_ok=True)
    failed = 0
    maker = make_timm if a.timm else make_torchvision if a.torchvision else make
    listed = a.timm or a.torchvision or a.models
    names = listed.split(",") if listed else list(MODELS)
    for name in names:
        try:
            torch.manual_seed(0)
            m, x = maker(name)
            try:
                peers.randomize(m)
            except Exception as e:  # e.g. MetaFormer's bias-free layers: the model's own initialization instead
                print(f"{name}: own initialization ({type(e).__name__} in randomize)", flush=True)
                torch.manual_seed(0)
                m, x = maker(name)
            path = os.path.join(a.work, f"{name}.onnx")
            axes = {0: "batch", 1: "seq"} if x.dim() == 2 and not x.is_floating_point() else {0: "batch"}
            for opset in (17, 18):  # 18 where an op needs it (VOLO's col2im), as a user would retry
                try:
                    torch.onnx.export(m, (x,), path, dynamo=False, opset_version=opset, input_names=["input_0"],
                                      output_names=["output"], dynamic_axes={"input_0": axes} if a.dynamic else None)
                    break
                except Exception as e:
                    if opset == 18 or "opset version 17 is not supported" not in str(e):
                        raise
            arr = x.numpy()
            f = os.path.join(a.work, "input_0.npy")
            np.save(f, arr)
            ref = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"input_0": arr})[0].astype(np.float64)
        except Exception as e:  # an export or reference failure is reported, not a kiln failure
            print(f"{name}: not comparable: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        extra = ["--gpuFusions"]
        if a.dynamic:  # the profile: batch 1..4 (sequence 16..128 for ids), run at the exported shape
            dims = list(x.shape)
            lo, hi = [1] + dims[1:], [4] + dims[1:]
            if x.dim() == 2 and not x.is_floating_point():
                lo[1], hi[1] = 16, 128
            fmt = lambda d: "x".join(map(str, d))
            extra += [f"--minShapes=input_0:{fmt(lo)}", f"--optShapes=input_0:{fmt(dims)}", f"--maxShapes=input_0:{fmt(hi)}",
                      f"--shapes=input_0:{fmt(dims)}"]
        got, ops = zoo_cpu_fusions.run_kiln(a.kiln, path, [f"input_0:{f}"], extra, a.work)
        if got is None:
            failed += 1
            print(f"{name}: FAIL: {ops}", flush=True)
            continue
        got = got.reshape(ref.shape)
        err = float(np.abs(got - ref).max()) / max(float(ref.max() - ref.min()), 1e-30)
        ok = err < 1e-4
        failed += not ok
        want = "?" if maker is not make else MODELS[name][4]
        left = " ".join(f"{k} {ops[k]}" for k in LEFTOVER if ops.get(k))
        print(f"{name}: err {err:.1e} {'ok' if ok else 'BAD'} | layers {sum(ops.values())} | attention {ops.get('Attention', 0)}/{want}"
              f" | {left}", flush=True)
    print(f"{failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
