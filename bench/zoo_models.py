"""The GPU perf zoo's models (bench/zoo.py): architectures beyond the five benchmark models, chosen to
cover what users deploy (issue 14): activations (SiLU, HardSwish, Mish, GELU), grouped and depthwise
convolutions, channels-last LayerNorm, GroupNorm, pooling and MLP token mixers, multi-branch CNNs,
hybrid conv/attention nets, ViTs with head dims 32-128, BERT with a padding mask, relative-position
attention, LLaMA/Qwen-style decoders, an encoder-decoder and audio encoders.

Each entry: name -> Spec(make, inputs, batches, tags). make() returns an eval-mode module with random
weights; inputs(b) returns the example inputs at batch b (CPU tensors). The first batch is 1, the
second the throughput batch. Transformers' attention runs eagerly for the ONNX export (the TorchScript
exporter cannot convert SDPA with GQA) and through SDPA for the peer (`peer_attention`), so the peer
is timed at its best."""
import collections

import torch

Spec = collections.namedtuple("Spec", "make inputs batches tags")


class Hidden(torch.nn.Module):
    """A transformers body called with one tensor, returning last_hidden_state."""
    def __init__(self, m, key="input_ids"):
        super().__init__()
        self.m, self.key = m, key

    def forward(self, x):
        return self.m(**{self.key: x}).last_hidden_state


class Decoder(Hidden):
    """A decoder called with ids and an all-ones attention mask, as generation code calls it: without a
    mask, transformers derives packed-sequence boundaries from position ids (aten::diff, which the
    ONNX exporter refuses); the ones mask folds to a constant at build time."""
    def forward(self, x):
        return self.m(input_ids=x, attention_mask=torch.ones_like(x)).last_hidden_state


class PaddedEncoder(torch.nn.Module):
    """BERT-style encoder with a padding mask derived from the ids (token 0 is padding), as a
    tokenizer's attention_mask would be: the mask path (expand, where/add -inf) is in the graph."""
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(input_ids=ids, attention_mask=(ids != 0).to(torch.int64)).last_hidden_state


class EncoderDecoder(torch.nn.Module):
    """Encoder-decoder (T5/BART-style): the decoder reads the first half of the ids as its input."""
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        half = ids.shape[1] // 2
        return self.m(input_ids=ids, decoder_input_ids=ids[:, :half]).last_hidden_state


def _tv(name, size=224, **kw):
    import torchvision
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


def _timm(name, **kw):
    import timm
    return lambda: timm.create_model(name, pretrained=False, **kw)


def _image(size=224):
    return lambda b: (torch.randn(b, 3, size, size),)


def _ids(seq, vocab=1000):
    # ids in [1, vocab) with ~1 in 8 set to 0 (padding) at the end of each row
    def make(b):
        g = torch.Generator().manual_seed(b * 1000 + seq)
        ids = torch.randint(1, vocab, (b, seq), generator=g)
        if seq >= 16:
            ids[:, seq - seq // 8:] = 0
        return (ids,)
    return make


def _hf(cls_name, cfg_name, wrap=Hidden, **cfg):
    def make():
        import transformers
        config = getattr(transformers, cfg_name)(**cfg)
        if hasattr(config, "use_cache"):
            config.use_cache = False  # one forward pass, no KV cache outputs
        config._attn_implementation = "eager"
        return wrap(getattr(transformers, cls_name)(config))
    return make


def _whisper_encoder():
    import transformers
    cfg = transformers.WhisperConfig(d_model=512, encoder_layers=6, encoder_attention_heads=8, decoder_layers=1,
                                     decoder_attention_heads=8, encoder_ffn_dim=2048, num_mel_bins=80,
                                     max_source_positions=1500)
    cfg._attn_implementation = "eager"
    return Hidden(transformers.WhisperModel(cfg).get_encoder(), "input_features")


def zoo():
    CNN, VIT, NLP = "cnn", "vit", "nlp"
    return collections.OrderedDict([
        # CNNs: activations, depthwise / grouped convs, normalizations
        ("efficientnet_b0", Spec(_tv("efficientnet_b0"), _image(), [1, 128], [CNN, "silu", "depthwise", "se"])),
        ("efficientnet_v2_s", Spec(_tv("efficientnet_v2_s"), _image(), [1, 64], [CNN, "silu", "fused-mbconv"])),
        ("mobilenet_v3_large", Spec(_tv("mobilenet_v3_large"), _image(), [1, 128], [CNN, "hardswish", "depthwise"])),
        ("resnet26_mish", Spec(_timm("resnet26", act_layer="mish"), _image(), [1, 128], [CNN, "mish"])),
        ("convnext_tiny", Spec(_tv("convnext_tiny"), _image(), [1, 64], [CNN, "gelu", "layernorm-nhwc", "dw7x7"])),
        ("regnet_y_800mf", Spec(_tv("regnet_y_800mf"), _image(), [1, 128], [CNN, "grouped", "se"])),
        ("resnext50_32x4d", Spec(_tv("resnext50_32x4d"), _image(), [1, 64], [CNN, "grouped"])),
        ("resnet50_gn", Spec(_timm("resnet50_gn"), _image(), [1, 64], [CNN, "groupnorm"])),
        ("densenet121", Spec(_tv("densenet121"), _image(), [1, 64], [CNN, "concat"])),
        ("shufflenet_v2", Spec(_tv("shufflenet_v2_x1_0"), _image(), [1, 128], [CNN, "channel-shuffle", "depthwise"])),
        ("inception_v3", Spec(_tv("inception_v3", init_weights=False, aux_logits=False), _image(299), [1, 64],
                              [CNN, "multi-branch"])),
        ("hrnet_w18_small", Spec(_timm("hrnet_w18_small"), _image(), [1, 64], [CNN, "multi-resolution"])),
        # token mixers without attention
        ("poolformer_s12", Spec(_timm("poolformer_s12"), _image(), [1, 64], [VIT, "pool-mixer", "groupnorm"])),
        ("mixer_b16", Spec(_timm("mixer_b16_224"), _image(), [1, 64], [VIT, "mlp-mixer"])),
        # hybrid conv / attention
        ("mobilevit_s", Spec(_timm("mobilevit_s"), _image(256), [1, 64], [VIT, "hybrid", "silu"])),
        ("segformer_b0", Spec(_hf("SegformerModel", "SegformerConfig", lambda m: Hidden(m, "pixel_values")),
                              _image(256), [1, 32], [VIT, "hybrid", "efficient-attention"])),
        # attention in other forms: EfficientViT's cascaded single-head attention with v @ attn^T,
        # MobileNetV4's MQA (one K / V head broadcast), NesT's [B, H, T, S, S] block attention
        ("efficientvit_m0", Spec(_timm("efficientvit_m0"), _image(), [1, 128], [VIT, "hybrid", "rank3-attention"])),
        ("mobilenetv4_hybrid_m", Spec(_timm("mobilenetv4_hybrid_medium"), _image(256), [1, 64], [VIT, "hybrid", "mqa"])),
        ("nest_tiny", Spec(_timm("nest_tiny"), _image(), [1, 64], [VIT, "block-attention"])),
        ("maxvit_t", Spec(_tv("maxvit_t"), _image(), [1, 32], [VIT, "hybrid", "einsum-attention", "grid-attention"])),
        # ViTs: head dims 32 (Swin), 64 (DeiT), 128
        ("swin_t", Spec(_tv("swin_t"), _image(), [1, 64], [VIT, "window-attention", "head32", "rel-pos-bias"])),
        ("deit_small", Spec(_timm("deit_small_patch16_224"), _image(), [1, 64], [VIT, "head64"])),
        ("vit_b16_head128", Spec(_timm("vit_base_patch16_224", num_heads=6), _image(), [1, 32], [VIT, "head128"])),
        # NLP encoders
        ("bert_padded_s128", Spec(_hf("BertModel", "BertConfig", PaddedEncoder), _ids(128), [1, 32],
                                  [NLP, "padding-mask"])),
        ("deberta_v2_s256", Spec(_hf("DebertaV2Model", "DebertaV2Config", Hidden, hidden_size=512, num_hidden_layers=6,
                                     num_attention_heads=8, intermediate_size=2048, vocab_size=1000),
                                 _ids(256), [1, 16], [NLP, "bmm-attention"])),
        # (the config above leaves DeBERTa's relative attention off: transformers' default; this one
        # is DeBERTa-v3's: c2p / p2c relative-position terms, log buckets, shared attention keys)
        ("deberta_v3_rel_s256", Spec(_hf("DebertaV2Model", "DebertaV2Config", Hidden, hidden_size=512, num_hidden_layers=6,
                                         num_attention_heads=8, intermediate_size=2048, vocab_size=1000, relative_attention=True,
                                         pos_att_type=["p2c", "c2p"], position_buckets=256, max_relative_positions=-1,
                                         norm_rel_ebd="layer_norm", share_att_key=True),
                                     _ids(256), [1, 16], [NLP, "rel-pos-attention", "bmm-attention"])),
        ("t5_encdec_s256", Spec(_hf("T5Model", "T5Config", EncoderDecoder, d_model=512, d_ff=2048, num_layers=6,
                                    num_decoder_layers=6, num_heads=8, vocab_size=1000),
                                _ids(256), [1, 16], [NLP, "encoder-decoder", "rel-pos-bias"])),
        # decoders: GQA, RoPE, RMSNorm, SwiGLU, causal
        ("llama_gqa_s1024", Spec(_hf("LlamaModel", "LlamaConfig", Decoder, hidden_size=1024, intermediate_size=2816,
                                     num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
                                     vocab_size=1000, max_position_embeddings=2048),
                                 _ids(1024), [1, 8], [NLP, "decoder", "gqa", "rope", "rmsnorm", "swiglu", "head64"])),
        ("qwen2_gqa_s512", Spec(_hf("Qwen2Model", "Qwen2Config", Decoder, hidden_size=896, intermediate_size=4864,
                                    num_hidden_layers=6, num_attention_heads=14, num_key_value_heads=2,
                                    vocab_size=1000, max_position_embeddings=2048),
                                _ids(512), [1, 16], [NLP, "decoder", "gqa", "rope", "rmsnorm", "swiglu", "head64"])),
        # decoders: interleaved partial rotary (GPT-J), head-interleaved fused Q / K / V (GPT-NeoX)
        ("gptj_s512", Spec(_hf("GPTJModel", "GPTJConfig", Decoder, n_embd=1024, n_layer=8, n_head=16, rotary_dim=32,
                               vocab_size=1000, n_positions=2048),
                           _ids(512), [1, 16], [NLP, "decoder", "rope-interleaved", "parallel-block"])),
        ("gpt_neox_s512", Spec(_hf("GPTNeoXModel", "GPTNeoXConfig", Decoder, hidden_size=1024, intermediate_size=4096,
                                   num_hidden_layers=8, num_attention_heads=16, rotary_pct=0.25, vocab_size=1000,
                                   max_position_embeddings=2048),
                               _ids(512), [1, 16], [NLP, "decoder", "rope-partial", "fused-qkv"])),
        # decoders: logit soft cap (Gemma-2: tanh-capped scores, GQA, GeGLU, head 128)
        ("gemma2_s512", Spec(_hf("Gemma2Model", "Gemma2Config", Decoder, hidden_size=1024, intermediate_size=4096,
                                 num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4, head_dim=128,
                                 vocab_size=1000, max_position_embeddings=2048),
                             _ids(512), [1, 16], [NLP, "decoder", "softcap", "gqa", "geglu", "head128"])),
        # audio: conv frontend + encoder
        ("wav2vec2_base", Spec(_hf("Wav2Vec2Model", "Wav2Vec2Config", lambda m: Hidden(m, "input_values")),
                               lambda b: (torch.randn(b, 16000),), [1, 16], ["audio", "conv-frontend", "groupnorm"])),
        ("whisper_base_encoder", Spec(_whisper_encoder, lambda b: (torch.randn(b, 80, 3000),), [1, 16],
                                      ["audio", "conv-frontend", "gelu"])),
    ])


def set_peer_attention(model):
    """Switches a transformers model (inside a wrapper) to SDPA attention for the peer: the math is
    the same as the eager attention the ONNX export used."""
    for mod in model.modules():
        cfg = getattr(mod, "config", None)
        if cfg is not None and getattr(cfg, "_attn_implementation", None) == "eager":
            try:
                cfg._attn_implementation = "sdpa"
            except Exception:
                pass
    return model
