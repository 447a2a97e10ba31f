"""What the tests share and are not tests themselves: the workflow's scratch copies and end-to-end grid
(workflow.py), tiny token shards and params files for training (train.py), the prepare stage's cached
tokenizer and documents (prepare.py), a filesystem and a lock held elsewhere for the run lock (lock.py), and
results, trees and files written as the stages would (synthetic.py), and checks on the report's figures as
matplotlib drew them (figures.py)."""
