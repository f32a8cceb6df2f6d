"""The learned belief around the model: hand constraints, sampling with the exact filter, the data
producer, evaluation and the Lightning trainer. Importing the package loads none of the trainer."""
