"""A small training step whose input batches are uploaded on a side stream, for
`streamlint validate --run -- python train_step_missing_record.py` on a GPU machine.

Each batch is uploaded inside the copy stream's block, so it belongs to the copy stream's pool.
The step reads it on the default stream and drops it without
`features.record_stream(torch.cuda.current_stream())`: the next upload can take its memory while
the step still reads it. streamlint flags the `del` (SL004, a transfer in a side stream); the
lifetime checker confirms it at run time.
"""

import torch


def train(steps=20, rows=4096):
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 256).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    copy_stream = torch.cuda.Stream()
    hosts = [torch.randn(rows, 256).pin_memory() for _ in range(2)]
    for step in range(steps):
        with torch.cuda.stream(copy_stream):
            features = hosts[step % 2].cuda(non_blocking=True)
        torch.cuda.current_stream().wait_stream(copy_stream)
        loss = model(features).square().mean()
        del features
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    return float(loss)


if __name__ == "__main__":
    print(f"loss {train():.4f}")
