"""Generate small varied .tflite models with TensorFlow (random weights, nothing downloaded).

Needs TensorFlow (not a dependency of nnscope; not run by the tests):
    python3 -m venv /tmp/tfenv && /tmp/tfenv/bin/pip install tensorflow
    /tmp/tfenv/bin/python tests/support/gen_tf_models.py OUTDIR [NAME ...]

Models vendored from it: tests/data/models/generated/ (see NOTICE).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

K = tf.keras
tf.random.set_seed(36)
np.random.seed(36)


def _convert(model, quant=None, rep=None, signature=None):
    if signature is not None:
        conv = tf.lite.TFLiteConverter.from_concrete_functions([signature], model)
    else:
        conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quant == "int8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    elif quant == "dynamic":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    elif quant == "float16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    return conv.convert()


def mobilenet_v3_small():
    m = K.applications.MobileNetV3Small(input_shape=(96, 96, 3), alpha=0.75, weights=None,
                                        include_top=False, pooling="avg",
                                        include_preprocessing=True, minimalistic=False)
    return _convert(m)


def efficientnet_b0():
    from keras.src.applications.efficientnet import EfficientNet
    m = EfficientNet(0.25, 0.25, 64, 0.2, name="efficientnet_tiny", weights=None,
                     input_shape=(64, 64, 3), classes=10)
    return _convert(m, quant="float16")


def transformer():
    x = K.Input((16, 32))
    a = K.layers.MultiHeadAttention(num_heads=4, key_dim=8)(x, x)
    h = K.layers.LayerNormalization()(x + a)
    f = K.layers.Dense(64)(h)
    f = K.layers.Lambda(lambda t: tf.nn.gelu(t, approximate=False))(f)
    f = K.layers.Dense(32)(f)
    y = K.layers.LayerNormalization()(h + f)
    y = K.layers.Lambda(lambda t: tf.nn.softmax(t, axis=-1))(y)
    return _convert(K.Model(x, y))


def lstm():
    x = K.Input((10, 8), batch_size=1)
    h = K.layers.LSTM(16, return_sequences=True)(x)
    h = K.layers.GRU(12)(h)
    y = K.layers.Dense(4, activation="softmax")(h)
    return _convert(K.Model(x, y))


def ops_mix():
    @tf.function(input_signature=[tf.TensorSpec((1, 16, 16, 4), tf.float32, "x"),
                                  tf.TensorSpec((1, 5), tf.int32, "idx")])
    def body(x, idx):
        r = tf.image.resize(x, (24, 24), method="bilinear")
        r = tf.image.resize(r, (12, 12), method="nearest")
        g = tf.gather(tf.reshape(r, (1, -1, 4)), idx[0] % 100, axis=1)
        w = tf.where(g > 0.0, g, g * 0.1)
        c = tf.math.cumsum(w, axis=1)
        am = tf.cast(tf.argmax(c, axis=-1), tf.float32)
        red = tf.reduce_max(r, axis=[1, 2]) + tf.reduce_min(r, axis=[1, 2]) + \
            tf.reduce_sum(r, axis=[1, 2]) + tf.reduce_prod(tf.sigmoid(r), axis=[1, 2]) + \
            tf.reduce_mean(r, axis=[1, 2])
        s = r[:, 1:11:2, ::3, :]
        parts = tf.split(s, 2, axis=-1)
        st = tf.stack([parts[0], parts[1]], axis=0)
        un = tf.unstack(st, axis=0)
        sq = tf.math.squared_difference(un[0], un[1])
        return tf.concat([tf.reshape(sq, (1, -1)), red, am, tf.reshape(c, (1, -1))], axis=1)
    return _convert(None, signature=body.get_concrete_function())


def transpose_conv():
    x = K.Input((8, 8, 4), batch_size=1)
    h = K.layers.Conv2DTranspose(6, 3, strides=2, padding="same")(x)
    h = K.layers.Conv2DTranspose(3, 3, strides=1, padding="valid", activation="relu")(h)
    h = K.layers.Conv2D(4, 3, dilation_rate=2)(h)
    h = K.layers.LeakyReLU(0.2)(h)
    h = K.layers.PReLU()(h)
    return _convert(K.Model(x, h))


def _cnn():
    x = K.Input((32, 32, 3), batch_size=1)
    h = K.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu6")(x)
    h = K.layers.DepthwiseConv2D(3, padding="same")(h)
    h = K.layers.BatchNormalization()(h)
    h = K.layers.ReLU()(h)
    h = K.layers.Conv2D(16, 1)(h)
    h = K.layers.MaxPooling2D(2)(h)
    h = K.layers.Conv2D(16, 3, padding="same", activation="tanh")(h)
    h = K.layers.AveragePooling2D(2)(h)
    h = K.layers.Flatten()(h)
    h = K.layers.Dense(10)(h)
    y = K.layers.Softmax()(h)
    return K.Model(x, y)


def int8_cnn():
    def rep():
        for _ in range(20):
            yield [np.random.uniform(-1, 1, (1, 32, 32, 3)).astype(np.float32)]
    return _convert(_cnn(), quant="int8", rep=rep)


def int8_cnn_float_io():
    def rep():
        for _ in range(20):
            yield [np.random.uniform(-1, 1, (1, 32, 32, 3)).astype(np.float32)]
    conv = tf.lite.TFLiteConverter.from_keras_model(_cnn())
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    return conv.convert()


def hybrid_dense():
    x = K.Input((64,), batch_size=1)
    h = K.layers.Dense(256, activation="relu")(x)
    h = K.layers.Dense(128, activation="sigmoid")(h)
    y = K.layers.Dense(10)(h)
    return _convert(K.Model(x, y), quant="dynamic")


def hybrid_conv():
    x = K.Input((16, 16, 8), batch_size=1)
    h = K.layers.Conv2D(64, 3, padding="same", activation="relu")(x)
    h = K.layers.Conv2D(64, 3, padding="same")(h)
    h = K.layers.GlobalAveragePooling2D()(h)
    y = K.layers.Dense(10)(h)
    return _convert(K.Model(x, y), quant="dynamic")


def float16_cnn():
    return _convert(_cnn(), quant="float16")


def multi_io():
    specs = [tf.TensorSpec((1, 8), tf.float32, "a"), tf.TensorSpec((1, 8), tf.int32, "b"),
             tf.TensorSpec((1, 8), tf.int64, "c"), tf.TensorSpec((1, 8), tf.bool, "d")]

    @tf.function(input_signature=specs)
    def body(a, b, c, d):
        bf = tf.cast(b, tf.float32)
        s = tf.where(d, a, bf)
        m = tf.logical_and(d, a > 0.0)
        i = b * 2 + tf.cast(c, tf.int32)
        cc = c + 3
        top = tf.math.top_k(s, k=3)
        return s * 2.0, m, i, cc, top.values, tf.argmin(s, axis=-1)
    return _convert(None, signature=body.get_concrete_function())


def misc_math():
    x = K.Input((4, 6), batch_size=1)

    def body(x):
        y = tf.abs(x) + 1.0
        y = tf.math.log(y) + tf.math.rsqrt(y) + tf.sqrt(y) + tf.exp(-y) + tf.sin(x) + tf.cos(x)
        y = tf.maximum(y, 0.5) - tf.minimum(x, 0.1) + tf.floor(x) + tf.math.round(x)
        y = tf.pow(y, 2.0) / (1.0 + tf.square(x))
        y = tf.transpose(y, (0, 2, 1))
        y = tf.tile(y, (1, 2, 1))
        y = tf.pad(y, [[0, 0], [1, 1], [2, 0]], mode="REFLECT")
        y = tf.expand_dims(y, -1)
        y = tf.squeeze(y, -1)
        y = tf.nn.l2_normalize(y, axis=-1)
        y = tf.reverse(y, axis=[1])
        return tf.nn.log_softmax(y) + tf.math.floormod(y, 0.3)
    return _convert(K.Model(x, K.layers.Lambda(body)(x)))


MODELS = {f.__name__: f for f in (mobilenet_v3_small, efficientnet_b0, transformer, lstm, ops_mix,
                                   transpose_conv, int8_cnn, int8_cnn_float_io, hybrid_dense,
                                   hybrid_conv, float16_cnn, multi_io, misc_math)}


def main(out: str, names) -> None:
    os.makedirs(out, exist_ok=True)
    for name in names or MODELS:
        try:
            data = MODELS[name]()
        except Exception as error:  # noqa: BLE001
            print(f"{name}: FAILED {type(error).__name__}: {str(error)[:300]}")
            continue
        with open(os.path.join(out, f"{name}.tflite"), "wb") as f:
            f.write(data)
        print(f"{name}: {len(data)} bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
