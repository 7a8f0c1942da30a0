"""Recurrent layers (src/ops/rnn.rs). The training IR keeps aten.lstm.input / gru.input /
rnn_tanh.input / rnn_relu.input and the cells; core ATen unrolls them over time into
addmm/sigmoid/tanh/cat (other families; 100-400 KB of graph per program), so only the cells and
one two-step LSTM export the core form too."""
import torch
import torch.nn as nn

from .case import Case, randn

f64 = torch.float64


def seeded(m: nn.Module, seed=3) -> nn.Module:
    torch.manual_seed(seed)
    m.reset_parameters() if hasattr(m, "reset_parameters") else None
    return m


class WithState(nn.Module):
    """Run a recurrent module with explicit initial state(s) and return every output."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x, *state):
        if len(state) == 2:
            return self.m(x, (state[0], state[1]))
        return self.m(x, state[0])


CASES = [
    Case("lstm", seeded(nn.LSTM(5, 7)), [randn(4, 2, 5)], tol="loose", core=False),
    Case("lstm_2layer_bidi_bf", seeded(nn.LSTM(5, 6, num_layers=2, bidirectional=True, batch_first=True)), [randn(2, 4, 5)], tol="loose", core=False),
    Case("lstm_state", WithState(seeded(nn.LSTM(3, 4, num_layers=2))), [randn(5, 2, 3), randn(2, 2, 4, seed=1), randn(2, 2, 4, seed=2)], tol="loose", core=False),
    Case("lstm_proj_nobias", seeded(nn.LSTM(4, 6, proj_size=3, bias=False, bidirectional=True)), [randn(3, 2, 4)], tol="loose", core=False),
    Case("lstm_unbatched", seeded(nn.LSTM(3, 4)), [randn(5, 3)], tol="loose", core=False),
    Case("lstm_f64", seeded(nn.LSTM(3, 4).double()), [randn(4, 2, 3, dtype=f64)], core=False),
    Case("lstm_core_short", seeded(nn.LSTM(3, 4)), [randn(2, 1, 3)], tol="loose"),
    Case("gru", seeded(nn.GRU(5, 6)), [randn(4, 3, 5)], tol="loose", core=False),
    Case("gru_bidi_bf_state", WithState(seeded(nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True))), [randn(2, 3, 4), randn(4, 2, 5, seed=1)], tol="loose", core=False),
    Case("rnn_tanh", seeded(nn.RNN(4, 5, num_layers=2)), [randn(3, 2, 4)], tol="loose", core=False),
    Case("rnn_relu_bidi", seeded(nn.RNN(4, 5, nonlinearity="relu", bidirectional=True, bias=False)), [randn(3, 2, 4)], tol="loose", core=False),
    Case("lstm_cell", WithState(seeded(nn.LSTMCell(4, 5))), [randn(3, 4), randn(3, 5, seed=1), randn(3, 5, seed=2)], tol="loose"),
    Case("gru_cell", seeded(nn.GRUCell(4, 5)), [randn(3, 4)], tol="loose"),
    Case("rnn_cell_relu", WithState(seeded(nn.RNNCell(4, 5, nonlinearity="relu"))), [randn(3, 4), randn(3, 5, seed=1)], tol="loose"),
    Case("rnn_cell_tanh_unbatched", seeded(nn.RNNCell(4, 5)), [randn(4)], tol="loose", core=False),
]
