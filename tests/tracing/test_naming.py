"""The naming contract: format/parse round trip and rejected names."""
import itertools

import pytest

from nnscope.tracing.naming import (APPLICATION_PHASES, MARKERS, Layer, ParsedName, Phase, format_name,
                            hidl_mark, is_execution_subphase, parse_name, tag)

VALID = [(layer, phase, marker) for layer, phase, marker
         in itertools.product(Layer, Phase, ("",) + MARKERS)
         if layer is Layer.APPLICATION or phase not in APPLICATION_PHASES]


@pytest.mark.parametrize("layer,phase,marker", VALID)
def test_format_parse_round_trip(layer, phase, marker):
    name = format_name(layer, phase, "Model::finish [x]", marker)
    assert name == f"{marker}[NN_{layer.value}_{phase.value}]Model::finish [x]"
    assert parse_name(name) == ParsedName(marker, layer, phase, "Model::finish [x]")


def test_tag_and_contract_examples():
    assert tag(Layer.RUNTIME, Phase.EXECUTION) == "[NN_LR_PE]"
    assert format_name(Layer.APPLICATION, Phase.OVERALL, "mobilenet") == "[NN_LA_PO]mobilenet"
    assert parse_name("[SW][NN_LC_PCO]conv2dFloat32").marker == "[SW]"


@pytest.mark.parametrize("phase", APPLICATION_PHASES)
@pytest.mark.parametrize("layer", [layer for layer in Layer if layer is not Layer.APPLICATION])
def test_application_phase_on_other_layer_is_rejected(layer, phase):
    with pytest.raises(ValueError, match="layer LA only"):
        format_name(layer, phase, "x")


@pytest.mark.parametrize("marker", ["[SWITCH]", "SW", "[sub]"])
def test_unknown_marker_is_rejected(marker):
    with pytest.raises(ValueError, match="unknown marker"):
        format_name(Layer.RUNTIME, Phase.EXECUTION, "x", marker)


@pytest.mark.parametrize("name", ["HIDL::IDevice::prepareModel::client", "[NN_LX_PE]x",
                                  "[NN_LR_PZ]x", "NN_LR_PE]x", "plain", "[XX][NN_LR_PE]x"])
def test_names_without_a_valid_tag_parse_to_none(name):
    assert parse_name(name) is None


def test_hidl_mark():
    assert hidl_mark("IPreparedModel", "execute", "server") == "HIDL::IPreparedModel::execute::server"
    with pytest.raises(ValueError, match="unknown HIDL side"):
        hidl_mark("IDevice", "prepareModel", "passthrough")


def test_execution_subphases():
    assert [p for p in Phase if is_execution_subphase(p)] == [
        Phase.INPUTS_AND_OUTPUTS, Phase.TRANSFORMATION, Phase.COMPUTATION, Phase.RESULTS]
